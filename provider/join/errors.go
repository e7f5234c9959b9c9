package join

import (
	"errors"
	"fmt"
)

// Error is a join failure with the Target condition reason it maps to and a
// message that says what is wrong and what to do.
type Error struct {
	Reason  string
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Reason, e.Message, e.Err)
	}
	return e.Reason + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with reason and a formatted message, wrapping err
// (which may be nil).
func Errorf(reason string, err error, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...), Err: err}
}

// ReasonOf returns the reason of err, or fallback when err carries none.
func ReasonOf(err error, fallback string) (reason, message string) {
	var je *Error
	if errors.As(err, &je) {
		msg := je.Message
		if je.Err != nil {
			msg += " (" + je.Err.Error() + ")"
		}
		return je.Reason, msg
	}
	return fallback, err.Error()
}
