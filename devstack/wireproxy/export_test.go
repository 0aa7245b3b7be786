package wireproxy

// SetBeforeDocument makes f run before each document of a statement Interleave mode
// splits, until the returned func restores the former hook.
func SetBeforeDocument(f func(coll string, stmt, k int)) (restore func()) {
	old := beforeDocument.Swap(&f)
	return func() { beforeDocument.Store(old) }
}
