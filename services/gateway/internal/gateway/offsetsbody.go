package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"

	"skein/libs/errs"
)

// offsetRoutes are the REST routes whose body carries offsets to commit:
// each entry's partition and offset must be in it. JSON can say a field is
// missing where protobuf cannot, and protobuf reads a missing offset as 0,
// so a commit that left it out would rewind the group to the partition's
// start. Kafka's OffsetCommit has no such default either. Keys are as in
// queryRoutes.
var offsetRoutes = map[string]bool{
	"POST /v1/groups/{group}/offsets":                  true,
	"POST /v1/transactions/{transactional_id}/offsets": true,
}

// requireOffsetFields answers INVALID_REQUEST for an offsets[] entry of a
// commit (see offsetRoutes) without its partition or offset, or with
// either null. A body that is not such JSON is left to the route's own
// decoding, which refuses it with its own message.
func requireOffsetFields(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, pathParams map[string]string) {
		pat, ok := runtime.HTTPPattern(r.Context())
		if !ok || !offsetRoutes[r.Method+" "+patternVar.ReplaceAllString(pat.String(), "{$1}")] {
			next(w, r, pathParams)
			return
		}
		// The body is bounded before it gets here (restLimits), and the
		// route reads all of it anyway.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			next(w, r, pathParams) // the route's decoding reports it
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		// Keys read exactly, as protojson reads them (encoding/json's
		// struct fields would also take "OFFSETS").
		var doc map[string]json.RawMessage
		var offsets []map[string]json.RawMessage
		if json.Unmarshal(body, &doc) == nil && json.Unmarshal(doc["offsets"], &offsets) == nil {
			for i, o := range offsets {
				for _, field := range []string{"partition", "offset"} {
					if v, ok := o[field]; !ok || string(bytes.TrimSpace(v)) == "null" {
						writeError(w, http.StatusBadRequest, errorBody{Code: int32(codes.InvalidArgument), ErrorCode: errs.InvalidRequest.Name,
							Message: fmt.Sprintf("offsets[%d]: %s is missing: a commit names each partition and the offset to commit", i, field)})
						return
					}
				}
			}
		}
		next(w, r, pathParams)
	}
}
