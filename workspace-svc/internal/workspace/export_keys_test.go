package workspace

// The by-key decoders the fuzz targets drive directly.
var (
	DecodePutItemByKeyRequest   = decodePutItemByKeyRequest
	DecodePutFolderByKeyRequest = decodePutFolderByKeyRequest
)
