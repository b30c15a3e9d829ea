package replica

import (
	"strings"

	"skein/libs/record"
)

// storeCodec reads a topic's compression.type: "producer" (the default)
// keeps batches as their producer sent them (recompress false); a codec,
// "uncompressed" included, is the one the leader stores every producer
// batch in.
func storeCodec(configs map[string]string) (recompress bool, codec record.Compression, err error) {
	name := strings.TrimSpace(configs["compression.type"])
	if name == "" || name == "producer" {
		return false, record.None, nil
	}
	if codec, err = record.ParseCompression(name); err != nil {
		return false, record.None, err
	}
	return true, codec, nil
}
