package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"skein/gen/openapi"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
	"skein/services/gateway/internal/budget"
	"skein/services/gateway/internal/restjson"
)

// errorBody is the REST error document (docs/API.md).
type errorBody struct {
	Code      int32  `json:"code"`
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
}

func writeError(w http.ResponseWriter, httpStatus int, body errorBody) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_ = json.NewEncoder(w).Encode(body)
}

// errorHandler answers a failed REST call: the errs row named in the
// status's ErrorInfo, or, for a status that carries none (grpc-gateway's own
// refusals of malformed JSON, wrong field types and bad path or query
// values), the row its gRPC code reads as: InvalidArgument is INVALID_REQUEST.
func errorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
	st := status.Convert(err)
	row := errs.Of(rpcerr.FromStatus(err))
	code, httpStatus := st.Code(), row.HTTP
	if st.Code() == codes.Canceled {
		httpStatus = 499 // the client went away; nginx's convention
	}
	if row == errs.UnknownServerError && st.Code() != codes.Internal && st.Code() != codes.Unknown {
		httpStatus = runtime.HTTPStatusFromCode(st.Code())
	}
	if row == errs.ThrottlingQuotaExceeded {
		w.Header().Set("Retry-After", budget.RetryAfterHeader())
	}
	msg := st.Message()
	if code == codes.InvalidArgument && len(st.Details()) == 0 {
		msg = restMessage(msg) // one of grpc-gateway's or protojson's own
	}
	writeError(w, httpStatus, errorBody{Code: int32(code), ErrorCode: row.Name, Message: msg})
}

// routingErrorHandler answers requests no route matches.
func routingErrorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	code := codes.NotFound
	msg := "no API route for " + r.Method + " " + r.URL.Path
	if httpStatus == http.StatusMethodNotAllowed {
		code, msg = codes.Unimplemented, "method "+r.Method+" is not allowed on "+r.URL.Path
	}
	writeError(w, httpStatus, errorBody{Code: int32(code), ErrorCode: errs.InvalidRequest.Name, Message: msg})
}

// restMarshaler is protojson under the REST conventions, except for a
// fetch's answer: restjson writes its records (thousands per answer) the
// same way without reflection.
type restMarshaler struct {
	runtime.JSONPb
}

// NewDecoder decodes a request body as exactly one JSON value: anything
// after it but white space is refused, where the JSON decoder alone would
// stop at the end of the first value and ignore the rest.
func (m *restMarshaler) NewDecoder(r io.Reader) runtime.Decoder {
	d := json.NewDecoder(r)
	one := runtime.DecoderWrapper{Decoder: d, UnmarshalOptions: m.UnmarshalOptions}
	return runtime.DecoderFunc(func(v any) error {
		if err := one.Decode(v); err != nil {
			return err
		}
		var extra json.RawMessage
		if err := d.Decode(&extra); err != io.EOF {
			return errors.New("the body holds more than one JSON value: a request is one JSON object")
		}
		return nil
	})
}

func (m *restMarshaler) Marshal(v any) ([]byte, error) {
	if r, ok := v.(*skeinv1.FetchResponse); ok {
		return restjson.AppendFetchResponse(nil, r), nil
	}
	return m.JSONPb.Marshal(v)
}

// newRESTMux maps the REST API onto the gRPC services reached through conn.
// A body that rl cut short is answered as its limit says (413 or 429).
func newRESTMux(ctx context.Context, conn *grpc.ClientConn, rl restLimits) (*runtime.ServeMux, error) {
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &restMarshaler{JSONPb: runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}}),
		runtime.WithErrorHandler(func(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
			if l, hit := bodyLimitHit(r.Context()); hit {
				rl.writeLimitHit(w, l)
				return
			}
			errorHandler(ctx, mux, m, w, r, err)
		}),
		runtime.WithRoutingErrorHandler(routingErrorHandler),
		// The principal the HTTP side verified (auth.wrapHTTP) rides the
		// in-memory hop as metadata.
		runtime.WithMetadata(principalMetadata),
		// Routes match the path as sent: an escaped slash stays inside its
		// parameter, so /v1/topics/a%2Fb reaches the topic handlers (and is
		// refused as an invalid topic name) instead of matching no route.
		runtime.WithUnescapingMode(runtime.UnescapingModeAllExceptSlash),
		// A POST is the method it says: grpc-gateway would otherwise run a
		// form-encoded POST as the GET of its path, or as the method an
		// X-HTTP-Method-Override header names (a DELETE, say).
		runtime.WithDisablePathLengthFallback(),
		runtime.SetQueryParameterParser(&strictQueryParser{}), // process-wide in grpc-gateway: the one REST mux is its only user
		runtime.WithMiddlewares(refuseQuery, requireOffsetFields),
	)
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		skeinv1.RegisterAdminServiceHandler,
		skeinv1.RegisterProducerServiceHandler,
		skeinv1.RegisterConsumerServiceHandler,
		skeinv1.RegisterGroupServiceHandler,
		skeinv1.RegisterTransactionServiceHandler,
	} {
		if err := register(ctx, mux, conn); err != nil {
			return nil, err
		}
	}
	return mux, nil
}

// newHTTPHandler is the whole HTTP surface; rl bounds the API's bodies.
func newHTTPHandler(api http.Handler, rl restLimits, ready func() bool, metrics http.Handler) *http.ServeMux {
	h := http.NewServeMux()
	h.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openapi.JSON)
	})
	h.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	h.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"waiting for metadata from a controller"}` + "\n"))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ready"}` + "\n"))
	})
	h.Handle("GET /metrics", metrics)
	h.Handle("/", rl.wrap(validUTF8(api)))
	return h
}

// refuseUncleanPath refuses a path with an empty, "." or ".." segment
// (/v1/groups//members): http.ServeMux would redirect it to its cleaned
// form, and a client that follows redirects would then call another route
// than it named (a DELETE /v1/groups//config became the deletion of a
// group named "config"). A missing name is the caller's mistake to hear of.
func refuseUncleanPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		clean := path.Clean(p)
		if strings.HasSuffix(p, "/") && clean != "/" {
			clean += "/" // the mux keeps a trailing slash
		}
		if p != "" && clean != p {
			writeError(w, http.StatusBadRequest, errorBody{Code: int32(codes.InvalidArgument), ErrorCode: errs.InvalidRequest.Name,
				Message: "the path " + strconv.Quote(p) + " has an empty, \".\" or \"..\" segment: name every part of the route"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// validUTF8 refuses a request whose path or query is not UTF-8 once
// decoded (a %FF, say): the names and values it carries become protobuf
// strings, which must be UTF-8, and the call would otherwise fail inside
// the gateway as a 500. (A JSON body's strings are checked by its decoder.)
func validUTF8(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bad := ""
		if !utf8.ValidString(r.URL.Path) {
			bad = "the path " + strconv.Quote(r.URL.Path) + " is not valid UTF-8 once decoded"
		} else {
			for k, vs := range r.URL.Query() {
				if !utf8.ValidString(k) || slices.ContainsFunc(vs, func(v string) bool { return !utf8.ValidString(v) }) {
					bad = "query parameter " + strconv.Quote(k) + " is not valid UTF-8 once decoded"
					break
				}
			}
		}
		if bad != "" {
			writeError(w, http.StatusBadRequest, errorBody{Code: int32(codes.InvalidArgument), ErrorCode: errs.InvalidRequest.Name, Message: bad})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin refuses state-changing requests that a browser sends from
// another origin (by their Sec-Fetch-Site or Origin headers): a web page
// could otherwise have its visitor's browser create, delete or produce
// through a gateway it can reach, such as one on localhost, and with mutual
// TLS the browser would even present the visitor's certificate. Clients
// that are not browsers (curl, programs) send neither header and are not
// affected; neither is the console, which the gateway serves itself. It
// wraps the whole HTTP surface, the console's own actions included.
func crossOrigin() *http.CrossOriginProtection {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, errorBody{Code: int32(codes.PermissionDenied), ErrorCode: errs.InvalidRequest.Name,
			Message: r.Method + " " + r.URL.Path + " from a web page of another origin is refused: the REST API takes state-changing requests from browsers only from its own origin"})
	}))
	return p
}
