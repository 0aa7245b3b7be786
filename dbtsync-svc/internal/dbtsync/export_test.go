package dbtsync

// The decoders, for the black-box fuzz tests.
var (
	DecodeStartSyncRequest   = decodeStartSyncRequest
	DecodeIntegrationRequest = decodeIntegrationRequest
	DecodeStagingRequest     = decodeStagingRequest
)
