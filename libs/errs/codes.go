package errs

import "net/http"

// Error codes: the stable, machine-readable `code` of every error body, the same in
// every service. api/openapi.yaml lists them (ErrorCode) with the statuses each goes with;
// a conformance test keeps the two in step. A client branches on the code, never on
// the message text.
const (
	// One per status, for errors no rule below names.
	CodeInvalidRequest       = "invalid_request"        // 400
	CodeUnauthenticated      = "unauthenticated"        // 401
	CodeForbidden            = "forbidden"              // 403
	CodeNotFound             = "not_found"              // 404
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeConflict             = "conflict"               // 409
	CodeTooLarge             = "too_large"              // 413
	CodeUnsupportedMediaType = "unsupported_media_type" // 415
	CodeRateLimited          = "rate_limited"           // 429
	CodeInternal             = "internal"               // 500
	CodeBadGateway           = "bad_gateway"            // 502
	CodeUnavailable          = "unavailable"            // 503
	CodeTimeout              = "timeout"                // 504
	CodeClientError          = "client_error"           // any other 4xx
	CodeServerError          = "server_error"           // any other 5xx

	// Named rules.
	CodeExternalUserLimit     = "external_user_limit"      // 403: the account's external-user limit
	CodeLiveSessionLimit      = "live_session_limit"       // 403: the account's live embed sessions
	CodeExternalUserDeleting  = "external_user_deleting"   // 409: a mint for an external user whose delete has begun
	CodeCreatorModeDisabled   = "creator_mode_disabled"    // 403: creatorMode without the useCreatorMode flag
	CodePlanNotEligible       = "plan_not_eligible"        // 403: embedding needs a premium or enterprise plan
	CodePersonalKey           = "personal_key"             // 403: a personal API key where an account key is needed
	CodeKeyOutOfScope         = "key_out_of_scope"         // 403: an API key scoped to other deployments
	CodeBranchNotFound        = "branch_not_found"         // 404: branchName is no branch of the deployment
	CodeBranchNotServed       = "branch_not_served"        // 400: a branch nothing is serving
	CodeSessionIDInvalid      = "session_id_invalid"       // 401: an unknown, expired or used embed session id
	CodeDefinitionType        = "definition_type_conflict" // 409: a definition cannot change its type
	CodeDepthLimit            = "depth_limit"              // 400: folders nest at most 8 levels deep
	CodeFolderCycle           = "folder_cycle"             // 400: a folder into itself or its descendant
	CodeFolderNotEmpty        = "folder_not_empty"         // 409: deleting a folder that holds items
	CodeItemLimit             = "item_limit"               // 400: items per deployment
	CodeFavoritesLimit        = "favorites_limit"          // 400: favorites per user and deployment
	CodeNotApplied            = "not_applied"              // 503: a bulk-move item the store failure left unmoved
	CodeRecursiveDeleteLimit  = "recursive_delete_limit"   // 400: items one recursive folder delete trashes
	CodeOriginalFolderGone    = "original_folder_gone"     // 409: a restore whose original folder is gone, without folderId
	CodeTrashedWithFolder     = "trashed_with_folder"      // 409: a restore or purge of an item trashed with a folder
	CodeJobLimit              = "job_limit"                // 429: a deployment's dbt sync jobs queued or running
	CodeStorageQuota          = "storage_quota"            // 413: what a deployment or account keeps in the dbt sync object store
	CodeEmbedAccessLimit      = "embed_access_limit"       // 400: entries of one object's embed grants
	CodeAPIKeyLimit           = "api_key_limit"            // 400: live API keys per account
	CodeServiceAccountLimit   = "service_account_limit"    // 400: service accounts per account
	CodeClientSecretLimit     = "client_secret_limit"      // 400: live client secrets per service account
	CodeConcurrencyLimit      = "concurrency_limit"        // 429: an account's requests in flight on an expensive route of one replica
	CodeIdempotencyKeyInvalid = "invalid_idempotency_key"  // 400: an Idempotency-Key that is not 1-255 visible ASCII characters
	CodeIdempotencyKeyInUse   = "idempotency_key_in_use"   // 409: the key's first request is still running
	CodeIdempotencyKeyReused  = "idempotency_key_reused"   // 422: the key was used with another request
	CodeIdempotencyLimit      = "idempotency_limit"        // 429: the account's idempotency records or bytes within their window
	CodeSourceChanged         = "source_changed"           // 409: a promotion whose source changed since its preview
	CodeDuplicateLimit        = "duplicate_limit"          // 400: items one duplicate creates
	CodeInvalidKey            = "invalid_key"              // 400: an item key outside its grammar
	CodeKeyTaken              = "key_taken"                // 409: an item key a live item of the type holds
	CodeKeyImmutable          = "key_immutable"            // 409: changing the key of an item that has one
	CodeVersionConflict       = "version_conflict"         // 409: expectedVersion is not the item's version
	CodeInvalidSelector       = "invalid_selector"         // 400: a dbt model selector (select, exclude) that cannot be read or is over a limit
	CodeSelectorNeedsManifest = "selector_needs_manifest"  // 400: a model selector's graph operators without a dbt manifest to read the graph from
	CodeBundleFormat          = "bundle_format"            // 400: an import bundle of another format (or none)
	CodeBundleInvalid         = "bundle_invalid"           // 400: an import bundle item that is malformed or names what the bundle lacks
	CodeWebhookNotFound       = "webhook_not_found"        // 404: no webhook of that id the caller may see
	CodeDeliveryNotFound      = "delivery_not_found"       // 404: no delivery of that id in the webhook
	CodeInvalidWebhookURL     = "invalid_webhook_url"      // 400: a webhook URL that is not absolute https (or http to an allowed host) or names a private address
	CodeInvalidEventPattern   = "invalid_event_pattern"    // 400: a webhook's events entry that is no action, prefix.* or *
	CodeWebhookLimit          = "webhook_limit"            // 409: the account's webhooks (WEBHOOK_MAX_SUBSCRIPTIONS)
	CodeDeliveryPending       = "delivery_pending"         // 409: a redelivery of a delivery that is pending already
)

// Codes maps every code to the statuses it is sent with (nil: any other status of its
// class, for client_error and server_error).
var Codes = map[string][]int{
	CodeInvalidRequest: {400}, CodeUnauthenticated: {401}, CodeForbidden: {403}, CodeNotFound: {404},
	CodeMethodNotAllowed: {405}, CodeConflict: {409}, CodeTooLarge: {413}, CodeUnsupportedMediaType: {415},
	CodeRateLimited: {429}, CodeInternal: {500}, CodeBadGateway: {502}, CodeUnavailable: {503}, CodeTimeout: {504},
	CodeClientError: nil, CodeServerError: nil, // any other 4xx, 5xx
	CodeExternalUserLimit: {403}, CodeLiveSessionLimit: {403}, CodeExternalUserDeleting: {409}, CodeCreatorModeDisabled: {403}, CodePlanNotEligible: {403}, CodePersonalKey: {403},
	CodeKeyOutOfScope: {403}, CodeBranchNotFound: {404}, CodeBranchNotServed: {400}, CodeSessionIDInvalid: {401},
	CodeDefinitionType: {409}, CodeDepthLimit: {400}, CodeFolderCycle: {400}, CodeFolderNotEmpty: {409},
	CodeItemLimit: {400}, CodeFavoritesLimit: {400}, CodeNotApplied: {503},
	CodeRecursiveDeleteLimit: {400}, CodeOriginalFolderGone: {409}, CodeTrashedWithFolder: {409},
	CodeJobLimit: {429}, CodeStorageQuota: {413}, CodeEmbedAccessLimit: {400},
	CodeAPIKeyLimit: {400}, CodeServiceAccountLimit: {400}, CodeClientSecretLimit: {400}, CodeConcurrencyLimit: {429},
	CodeIdempotencyKeyInvalid: {400}, CodeIdempotencyKeyInUse: {409}, CodeIdempotencyKeyReused: {422}, CodeIdempotencyLimit: {429},
	CodeSourceChanged: {409}, CodeDuplicateLimit: {400},
	CodeInvalidKey: {400}, CodeKeyTaken: {409}, CodeKeyImmutable: {409}, CodeVersionConflict: {409},
	CodeInvalidSelector: {400}, CodeSelectorNeedsManifest: {400},
	CodeBundleFormat: {400}, CodeBundleInvalid: {400},
	CodeWebhookNotFound: {404}, CodeDeliveryNotFound: {404}, CodeInvalidWebhookURL: {400}, CodeInvalidEventPattern: {400},
	CodeWebhookLimit: {409}, CodeDeliveryPending: {409},
}

// DefaultCode is the code of an error that no rule names: one per status.
func DefaultCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidRequest
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case http.StatusConflict:
		return CodeConflict
	case http.StatusRequestEntityTooLarge:
		return CodeTooLarge
	case http.StatusUnsupportedMediaType:
		return CodeUnsupportedMediaType
	case http.StatusTooManyRequests:
		return CodeRateLimited
	case http.StatusInternalServerError:
		return CodeInternal
	case http.StatusBadGateway:
		return CodeBadGateway
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	case http.StatusGatewayTimeout:
		return CodeTimeout
	}
	if status >= 500 {
		return CodeServerError
	}
	return CodeClientError
}

// PushUnverified is the message of the one 401 of a dbt push webhook that cannot be
// verified: the gateway answers it for an unknown deployment, dbtsync-svc for no
// integration, no secret or a bad signature, so a sender cannot tell which.
const PushUnverified = "the push webhook's signature does not verify against the deployment's dbt git integration"
