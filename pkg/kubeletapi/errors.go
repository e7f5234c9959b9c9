package kubeletapi

import (
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
)

// childError maps an error of this cluster's API server to the class
// virtual-kubelet turns into an HTTP status (404, 400, else 500), keeping
// the child's message.
func childError(err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return errdefs.AsNotFound(err)
	case apierrors.IsBadRequest(err), apierrors.IsInvalid(err):
		return errdefs.AsInvalidInput(err)
	}
	return err
}

// internalExecPrefix is what a kubelet's exec server (and
// virtual-kubelet's) puts before an error that is not an exit code, in an
// InternalError status; the API server's stream translator wraps that in
// one more InternalError on the way to the client.
const internalExecPrefix = "error executing command in container: "

// unwrapExecError strips what the levels below added to an exec error that
// is not an exit code, down to the leaf's own words. The exec server of
// this level and the parent's API server then add exactly what the leaf's
// added, so that the caller at the root reads the message a caller in the
// leaf reads, not one more prefix per level.
func unwrapExecError(err error) error {
	msg := err.Error()
	if i := strings.Index(msg, internalExecPrefix); i >= 0 {
		return errors.New(msg[i+len(internalExecPrefix):])
	}
	return err
}
