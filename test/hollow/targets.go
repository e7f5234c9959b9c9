package hollow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api/v1alpha1"
)

const targetsPath = "/apis/nestlet.io/v1alpha1/targets"

// targetServer holds the Targets of a simulated cluster: a testing.Fake
// over an ObjectTracker, with the store's API-server semantics, used
// through client-go's generic fake client. v1alpha1.TargetInterface is the
// concrete *gentype.ClientWithList (not an interface a fake could
// implement), so the agent gets a real one, whose requests this
// http.RoundTripper serves in process, without a socket.
type targetServer struct {
	fake   *clienttesting.Fake
	store  *store
	typed  *gentype.FakeClientWithList[*v1alpha1.Target, *v1alpha1.TargetList]
	params runtime.ParameterCodec
}

func newTargetServer(clk clock.PassiveClock) (*targetServer, v1alpha1.TargetInterface, error) {
	sch := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(sch); err != nil {
		return nil, nil, err
	}
	tracker := clienttesting.NewObjectTracker(sch, serializer.NewCodecFactory(sch).UniversalDecoder())
	fake := &clienttesting.Fake{}
	fake.AddReactor("*", "*", clienttesting.ObjectReaction(tracker))
	st := newStore(tracker, sch, clk)
	st.install(fake)
	s := &targetServer{
		fake:  fake,
		store: st,
		typed: gentype.NewFakeClientWithList[*v1alpha1.Target, *v1alpha1.TargetList](fake, "",
			v1alpha1.SchemeGroupVersion.WithResource("targets"), v1alpha1.SchemeGroupVersion.WithKind("Target"),
			func() *v1alpha1.Target { return &v1alpha1.Target{} },
			func() *v1alpha1.TargetList { return &v1alpha1.TargetList{} },
			func(dst, src *v1alpha1.TargetList) { dst.ListMeta = src.ListMeta },
			func(l *v1alpha1.TargetList) []*v1alpha1.Target { return gentype.ToPointerSlice(l.Items) },
			func(l *v1alpha1.TargetList, items []*v1alpha1.Target) { l.Items = gentype.FromPointerSlice(items) }),
		params: runtime.NewParameterCodec(sch),
	}
	client, err := v1alpha1.NewTargetClient(&rest.Config{
		Host:      "http://targets.hollow.invalid",
		Transport: s,
		QPS:       -1, // no client-side throttling: nothing to protect
	})
	if err != nil {
		return nil, nil, err
	}
	return s, client, nil
}

// RoundTrip serves one request of the Target REST API.
func (s *targetServer) RoundTrip(req *http.Request) (*http.Response, error) {
	rest, ok := strings.CutPrefix(req.URL.Path, targetsPath)
	if !ok || (rest != "" && rest[0] != '/') {
		return errorResponse(req, apierrors.NewNotFound(v1alpha1.Resource("targets"), req.URL.Path)), nil
	}
	var name, sub string
	if parts := strings.Split(strings.Trim(rest, "/"), "/"); parts[0] != "" {
		name = parts[0]
		if len(parts) > 1 {
			sub = parts[1]
		}
		if len(parts) > 2 || (sub != "" && sub != "status") {
			return errorResponse(req, apierrors.NewNotFound(v1alpha1.Resource("targets/"+sub), name)), nil
		}
	}
	ctx := req.Context()
	q := req.URL.Query()
	gv := v1alpha1.SchemeGroupVersion
	var obj runtime.Object
	var err error
	switch {
	case req.Method == http.MethodGet && name == "":
		var opts metav1.ListOptions
		if err := s.params.DecodeParameters(q, gv, &opts); err != nil {
			return errorResponse(req, apierrors.NewBadRequest(err.Error())), nil
		}
		if opts.Watch {
			return s.serveWatch(req, opts), nil
		}
		obj, err = s.typed.List(ctx, opts)
	case req.Method == http.MethodGet:
		var opts metav1.GetOptions
		if err := s.params.DecodeParameters(q, gv, &opts); err != nil {
			return errorResponse(req, apierrors.NewBadRequest(err.Error())), nil
		}
		obj, err = s.typed.Get(ctx, name, opts)
	case req.Method == http.MethodPost && name == "":
		var opts metav1.CreateOptions
		t := &v1alpha1.Target{}
		if err = decodeRequest(req, q, s.params, &opts, t); err == nil {
			obj, err = s.typed.Create(ctx, t, opts)
			if err == nil {
				return objectResponse(req, http.StatusCreated, obj), nil
			}
		}
	case req.Method == http.MethodPut && name != "":
		var opts metav1.UpdateOptions
		t := &v1alpha1.Target{}
		if err = decodeRequest(req, q, s.params, &opts, t); err == nil {
			if t.Name != name {
				err = apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", t.Name, name))
			} else if sub == "status" {
				obj, err = s.typed.UpdateStatus(ctx, t, opts)
			} else {
				obj, err = s.typed.Update(ctx, t, opts)
			}
		}
	case req.Method == http.MethodDelete && name != "":
		opts := metav1.DeleteOptions{}
		if err = decodeRequest(req, q, s.params, &opts, &opts); err == nil {
			if err = s.typed.Delete(ctx, name, opts); err == nil {
				obj = &metav1.Status{Status: metav1.StatusSuccess}
			}
		}
	case req.Method == http.MethodPatch && name != "":
		var opts metav1.PatchOptions
		var data []byte
		if err = s.params.DecodeParameters(q, gv, &opts); err == nil {
			if data, err = readBody(req); err == nil {
				var subs []string
				if sub != "" {
					subs = []string{sub}
				}
				obj, err = s.typed.Patch(ctx, name, types.PatchType(req.Header.Get("Content-Type")), data, opts, subs...)
			}
		}
	default:
		err = apierrors.NewMethodNotSupported(v1alpha1.Resource("targets"), req.Method)
	}
	if err != nil {
		return errorResponse(req, err), nil
	}
	return objectResponse(req, http.StatusOK, obj), nil
}

func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	defer req.Body.Close()
	return io.ReadAll(req.Body)
}

// decodeRequest decodes the query into opts and the JSON body into obj.
func decodeRequest(req *http.Request, q map[string][]string, params runtime.ParameterCodec, opts, obj runtime.Object) error {
	if err := params.DecodeParameters(q, v1alpha1.SchemeGroupVersion, opts); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	data, err := readBody(req)
	if err != nil {
		return err
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, obj); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("decoding the body: %v", err))
		}
	}
	return nil
}

// serveWatch streams watch events as the API server does: JSON WatchEvents
// one after another, until the client closes the body or its context ends.
func (s *targetServer) serveWatch(req *http.Request, opts metav1.ListOptions) *http.Response {
	w, err := s.typed.Watch(req.Context(), opts)
	if err != nil {
		return errorResponse(req, err)
	}
	pr, pw := io.Pipe()
	body := &watchBody{PipeReader: pr, closed: make(chan struct{})}
	go func() {
		defer w.Stop()
		enc := json.NewEncoder(pw)
		for {
			select {
			case <-req.Context().Done():
				_ = pw.CloseWithError(req.Context().Err())
				return
			case <-body.closed:
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					_ = pw.Close()
					return
				}
				raw, err := json.Marshal(withTypeMeta(ev.Object))
				if err != nil {
					_ = pw.CloseWithError(err)
					return
				}
				if err := enc.Encode(metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: raw}}); err != nil {
					return
				}
			}
		}
	}()
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          body,
		ContentLength: -1,
		Request:       req,
	}
}

// watchBody tells the streaming goroutine when the client is done.
type watchBody struct {
	*io.PipeReader
	closed chan struct{}
	once   sync.Once
}

func (b *watchBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.PipeReader.Close()
}

// withTypeMeta sets apiVersion and kind, which the client's decoder needs.
func withTypeMeta(obj runtime.Object) runtime.Object {
	switch o := obj.(type) {
	case *v1alpha1.Target:
		o.APIVersion, o.Kind = v1alpha1.SchemeGroupVersion.String(), "Target"
	case *v1alpha1.TargetList:
		o.APIVersion, o.Kind = v1alpha1.SchemeGroupVersion.String(), "TargetList"
	case *metav1.Status:
		o.APIVersion, o.Kind = "v1", "Status"
	}
	return obj
}

func objectResponse(req *http.Request, code int, obj runtime.Object) *http.Response {
	data, err := json.Marshal(withTypeMeta(obj))
	if err != nil {
		return errorResponse(req, apierrors.NewInternalError(err))
	}
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(data)),
		ContentLength: int64(len(data)),
		Request:       req,
	}
}

// errorResponse is err as the API server's Status body and code.
func errorResponse(req *http.Request, err error) *http.Response {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	if status.Code == 0 {
		status.Code = http.StatusInternalServerError
	}
	status.Status = metav1.StatusFailure
	return objectResponse(req, int(status.Code), &status)
}
