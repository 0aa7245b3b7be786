package workspace

// The decoders and request types the black-box fuzz targets (package workspace_test)
// drive directly.
var (
	Base                        = base
	DecodeBulkMoveRequest       = decodeBulkMoveRequest
	DecodeMoveRequest           = decodeMoveRequest
	DecodeCreateFolderRequest   = decodeCreateFolderRequest
	DecodeCreateItemRequest     = decodeCreateItemRequest
	DecodeSetPermissionsRequest = decodeSetPermissionsRequest
	DecodeUpdateFolderRequest   = decodeUpdateFolderRequest
	DecodeListRequest           = decodeListRequest
	DecodeUpdateItemRequest     = decodeUpdateItemRequest
	DecodePublishRequest        = decodePublishRequest
)

type (
	ListRequest   = listRequest
	SearchRequest = searchRequest
)

// The decorators NewService applies (Options.Audit, Logger, Metrics), one at a time.
var (
	AuditingMiddleware      = auditingMiddleware
	LoggingMiddleware       = loggingMiddleware
	InstrumentingMiddleware = instrumentingMiddleware
)
