package api

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
)

// The wire form of a FetchResponse, written straight from a fetch's records:
// the same bytes protobuf-go marshals from the message toConsumed builds
// (fields in number order, zero scalars left out), without a message per
// record and header or a copy of every key and value into it first.

// Field numbers of skein.v1.FetchResponse, ConsumedRecord and Header.
const (
	fetchRecords        protowire.Number = 1
	fetchNextOffset     protowire.Number = 2
	fetchHighWatermark  protowire.Number = 3
	fetchLastStable     protowire.Number = 4
	fetchLogStartOffset protowire.Number = 5

	recTopic       protowire.Number = 1
	recPartition   protowire.Number = 2
	recOffset      protowire.Number = 3
	recTimestamp   protowire.Number = 4
	recKey         protowire.Number = 5 // key_bytes is 6
	recValue       protowire.Number = 7 // value_bytes is 8
	recHeaders     protowire.Number = 9
	recLeaderEpoch protowire.Number = 10
	// delivery_attempt (11) is a group's, never in a FetchResponse.
	recTimestampType protowire.Number = 12

	hdrKey   protowire.Number = 1
	hdrValue protowire.Number = 2 // value_bytes is 3
)

// wireFetchable reports whether res can be written by appendFetchResponse:
// protobuf refuses to marshal a header key that is not UTF-8 (the message
// path then fails as it always has).
func wireFetchable(res *client.FetchResult) bool {
	for i := range res.Records {
		for _, h := range res.Records[i].Headers {
			if !utf8.ValidString(h.Key) {
				return false
			}
		}
	}
	return true
}

// fetchResponseSize is the length of appendFetchResponse's output.
func fetchResponseSize(res *client.FetchResult, enc skeinv1.Encoding) int {
	n := 0
	for i := range res.Records {
		n += sizeField(fetchRecords, recordSize(&res.Records[i], enc))
	}
	return n + sizeInt(fetchNextOffset, res.NextOffset) + sizeInt(fetchHighWatermark, res.HighWatermark) +
		sizeInt(fetchLastStable, res.LastStableOffset) + sizeInt(fetchLogStartOffset, res.LogStartOffset)
}

// appendFetchResponse appends res as a FetchResponse whose keys, values and
// header values are text or bytes as enc asks (see encode).
func appendFetchResponse(b []byte, res *client.FetchResult, enc skeinv1.Encoding) []byte {
	for i := range res.Records {
		r := &res.Records[i]
		b = protowire.AppendTag(b, fetchRecords, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(recordSize(r, enc)))
		b = appendRecord(b, r, enc)
	}
	b = appendInt(b, fetchNextOffset, res.NextOffset)
	b = appendInt(b, fetchHighWatermark, res.HighWatermark)
	b = appendInt(b, fetchLastStable, res.LastStableOffset)
	return appendInt(b, fetchLogStartOffset, res.LogStartOffset)
}

func recordSize(r *client.ConsumedRecord, enc skeinv1.Encoding) int {
	n := 0
	if r.Topic != "" {
		n += sizeField(recTopic, len(r.Topic))
	}
	n += sizeInt(recPartition, int64(r.Partition)) + sizeInt(recOffset, r.Offset) + sizeInt(recTimestamp, r.Timestamp)
	if r.Key != nil {
		n += sizeField(recKey, len(r.Key))
	}
	if r.Value != nil {
		n += sizeField(recValue, len(r.Value))
	}
	for _, h := range r.Headers {
		n += sizeField(recHeaders, headerSize(h.Key, h.Value))
	}
	return n + sizeInt(recLeaderEpoch, int64(r.LeaderEpoch)) + sizeInt(recTimestampType, int64(timestampType(r.LogAppendTime)))
}

func appendRecord(b []byte, r *client.ConsumedRecord, enc skeinv1.Encoding) []byte {
	if r.Topic != "" {
		b = protowire.AppendTag(b, recTopic, protowire.BytesType)
		b = protowire.AppendString(b, r.Topic)
	}
	b = appendInt(b, recPartition, int64(r.Partition))
	b = appendInt(b, recOffset, r.Offset)
	b = appendInt(b, recTimestamp, r.Timestamp)
	b = appendTextOrBytes(b, recKey, r.Key, enc)
	b = appendTextOrBytes(b, recValue, r.Value, enc)
	for _, h := range r.Headers {
		b = protowire.AppendTag(b, recHeaders, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(headerSize(h.Key, h.Value)))
		if h.Key != "" {
			b = protowire.AppendTag(b, hdrKey, protowire.BytesType)
			b = protowire.AppendString(b, h.Key)
		}
		b = appendTextOrBytes(b, hdrValue, h.Value, enc)
	}
	b = appendInt(b, recLeaderEpoch, int64(r.LeaderEpoch))
	return appendInt(b, recTimestampType, int64(timestampType(r.LogAppendTime)))
}

func headerSize(key string, value []byte) int {
	n := 0
	if key != "" {
		n += sizeField(hdrKey, len(key))
	}
	if value != nil {
		n += sizeField(hdrValue, len(value))
	}
	return n
}

// appendTextOrBytes writes v as the text field num or the bytes field
// num+1, as encode picks; nil writes neither.
func appendTextOrBytes(b []byte, num protowire.Number, v []byte, enc skeinv1.Encoding) []byte {
	if v == nil {
		return b
	}
	if enc != skeinv1.Encoding_TEXT || !utf8.Valid(v) {
		num++
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// sizeField is the size of a length-delimited field of n bytes; the text
// and bytes forms of a field have the same size (their numbers are below 16).
func sizeField(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// sizeInt and appendInt: an int32 or int64 field, left out when zero (an
// int32 is sign-extended, as protobuf does).
func sizeInt(num protowire.Number, v int64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(uint64(v))
}

func appendInt(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}
