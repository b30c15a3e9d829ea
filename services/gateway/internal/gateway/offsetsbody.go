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

// offsetRoutes are the REST routes whose body carries a list of partitions
// and offsets: each entry's partition and offset must be in it. JSON can
// say a field is missing where protobuf cannot, and protobuf reads a
// missing one as 0, so a commit that left the offset out would rewind the
// group to the partition's start, a member's fetch that left a position's
// offset out would read its partition again from 0, and a DeleteRecords
// that left the partition out would delete from partition 0. Kafka's
// OffsetCommit and DeleteRecords have no such defaults either. Keys are as
// in queryRoutes.
var offsetRoutes = map[string]offsetList{
	"POST /v1/groups/{group}/offsets":                     {"offsets", "a commit names each partition and the offset to commit"},
	"POST /v1/transactions/{transactional_id}/offsets":    {"offsets", "a commit names each partition and the offset to commit"},
	"POST /v1/topics/{topic}/records:delete":              {"partitions", "each entry names a partition and the offset to delete records before (-1: the high watermark)"},
	"POST /v1/groups/{group}/members/{member_id}/records": {"positions", "each position names a partition and the offset to read next (-1: its committed offset), as the previous answer's positions do"},
}

// offsetList is where a route's body lists its partitions and offsets,
// and what the error says of them.
type offsetList struct {
	key  string // the list's JSON key
	says string
}

// requireOffsetFields answers INVALID_REQUEST for an entry of a route's
// list (see offsetRoutes) without its partition or offset, or with either
// null. A body that is not such JSON is left to the route's own decoding,
// which refuses it with its own message.
func requireOffsetFields(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, pathParams map[string]string) {
		pat, ok := runtime.HTTPPattern(r.Context())
		var list offsetList
		if ok {
			list, ok = offsetRoutes[r.Method+" "+patternVar.ReplaceAllString(pat.String(), "{$1}")]
		}
		if !ok {
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
		var entries []map[string]json.RawMessage
		if json.Unmarshal(body, &doc) == nil && json.Unmarshal(doc[list.key], &entries) == nil {
			for i, o := range entries {
				for _, field := range []string{"partition", "offset"} {
					if v, ok := o[field]; !ok || string(bytes.TrimSpace(v)) == "null" {
						writeError(w, http.StatusBadRequest, errorBody{Code: int32(codes.InvalidArgument), ErrorCode: errs.InvalidRequest.Name,
							Message: fmt.Sprintf("%s[%d]: %s is missing: %s", list.key, i, field, list.says)})
						return
					}
				}
			}
		}
		next(w, r, pathParams)
	}
}
