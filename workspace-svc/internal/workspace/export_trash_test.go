package workspace

// The trash's decoders, for the black-box fuzz targets.
var (
	DecodeTrashItemsRequest   = decodeTrashItemsRequest
	DecodeTrashListRequest    = decodeTrashListRequest
	DecodeDeleteFolderRequest = decodeDeleteFolderRequest
)
