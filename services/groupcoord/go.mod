module skein/services/groupcoord

go 1.26.0

replace (
	skein/gen => ../../gen
	skein/libs => ../../libs
)

require (
	pgregory.net/rapid v1.3.0
	skein/libs v0.0.0
)

require (
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
