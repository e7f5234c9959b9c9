package kubeletapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
)

func TestChildError(t *testing.T) {
	notFound := apierrors.NewNotFound(corev1.Resource("pods"), "web")
	tests := []struct {
		name      string
		err       error
		wantClass string // notFound, invalidInput or "" (neither)
		wantCode  int    // the status writeError gives it
	}{
		{name: "not found", err: notFound, wantClass: "notFound", wantCode: http.StatusNotFound},
		{name: "wrapped not found", err: fmt.Errorf("reading logs: %w", notFound), wantClass: "notFound", wantCode: http.StatusNotFound},
		{
			name:      "bad request (a container that is not in the pod)",
			err:       apierrors.NewBadRequest(`container "nope" in pod "web" is not valid`),
			wantClass: "invalidInput", wantCode: http.StatusBadRequest,
		},
		{
			name: "invalid",
			err: apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("PodLogOptions").GroupKind(), "web",
				field.ErrorList{field.Invalid(field.NewPath("tailLines"), -1, "must be positive")}),
			wantClass: "invalidInput", wantCode: http.StatusBadRequest,
		},
		{name: "internal error", err: apierrors.NewInternalError(errBoom), wantCode: http.StatusInternalServerError},
		{name: "forbidden", err: apierrors.NewForbidden(corev1.Resource("pods"), "web", errBoom), wantCode: http.StatusInternalServerError},
		{name: "plain error", err: errBoom, wantCode: http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := childError(tt.err)
			require.Error(t, got)
			assert.Equal(t, tt.err.Error(), got.Error(), "the child's message is kept")
			assert.Equal(t, tt.wantClass == "notFound", errdefs.IsNotFound(got), "IsNotFound")
			assert.Equal(t, tt.wantClass == "invalidInput", errdefs.IsInvalidInput(got), "IsInvalidInput")
			if tt.wantClass == "" {
				assert.Equal(t, tt.err, got, "an unclassified error is returned as is")
			}

			rec := httptest.NewRecorder()
			writeError(rec, got)
			assert.Equal(t, tt.wantCode, rec.Code)
			assert.Contains(t, rec.Body.String(), tt.err.Error())
		})
	}
	t.Run("nil", func(t *testing.T) {
		assert.NoError(t, childError(nil))
	})
}

func TestUnwrapExecError(t *testing.T) {
	const leaf = `failed to exec in container: failed to start exec "abc": OCI runtime exec failed: exec: "nope": executable file not found in $PATH: unknown`
	tests := []struct {
		name string
		err  error
		want string
		// same: the very error passed in is returned (class included).
		same bool
	}{
		{
			name: "one InternalError from the leaf's exec server",
			err:  errors.New("Internal error occurred: error executing command in container: " + leaf),
			want: leaf,
		},
		{
			name: "the status error itself",
			err:  apierrors.NewInternalError(errors.New("error executing command in container: " + leaf)),
			want: leaf,
		},
		{
			name: "one more InternalError from an API server's stream translator",
			err:  errors.New("Internal error occurred: Internal error occurred: error executing command in container: " + leaf),
			want: leaf,
		},
		{
			name: "three InternalErrors",
			err:  errors.New("Internal error occurred: Internal error occurred: Internal error occurred: error executing command in container: " + leaf),
			want: leaf,
		},
		{
			name: "classified by childError on the way",
			err:  childError(apierrors.NewInternalError(errors.New("error executing command in container: " + leaf))),
			want: leaf,
		},
		{
			name: "only the prefix the levels below added: the leaf's own words keep theirs",
			err:  errors.New("Internal error occurred: error executing command in container: sh: error executing command in container: no"),
			want: "sh: error executing command in container: no",
		},
		{
			name: "without the exec prefix, an InternalError is unchanged",
			err:  errors.New("Internal error occurred: unable to upgrade connection: container not found"),
			same: true,
		},
		{name: "plain error unchanged", err: errBoom, same: true},
		{name: "not found unchanged, class kept", err: errdefs.NotFound(`pod "web" not found`), same: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unwrapExecError(tt.err)
			require.Error(t, got)
			if tt.same {
				assert.Equal(t, tt.err, got)
				assert.Equal(t, errdefs.IsNotFound(tt.err), errdefs.IsNotFound(got))
				return
			}
			assert.Equal(t, tt.want, got.Error())
		})
	}
}
