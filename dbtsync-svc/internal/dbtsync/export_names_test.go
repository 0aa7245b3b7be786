package dbtsync

// SetMaxOpenNames sets the upload decoder's limit of names in open objects until the
// returned function puts it back.
func SetMaxOpenNames(n int) (restore func()) {
	saved := maxOpenNames
	maxOpenNames = n
	return func() { maxOpenNames = saved }
}
