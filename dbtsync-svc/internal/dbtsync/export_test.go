package dbtsync

import "io"

// The decoders, each with the rules the service applies to what it decoded, for the
// black-box fuzz tests: a body is either refused with a client error or accepted.

func DecodeStartSyncRequest(body io.Reader, manifest io.Writer) (StartSyncInput, error) {
	in, err := decodeStartSyncRequest(body, manifest)
	if err == nil {
		err = in.validate()
	}
	return in, err
}

func DecodeIntegrationRequest(body io.Reader) (IntegrationInput, error) {
	in, err := decodeIntegrationRequest(body)
	if err == nil {
		err = in.validate()
	}
	return in, err
}

var DecodeStagingRequest = decodeStagingRequest
