package mongostore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/wireproxy"
	"github.com/analyticsco/platform/libs/mongox"
)

// TestAVersionReadWhileItIsDroppedIsWholeOrGone: the oldest kept version is read while
// a new version pushes it out. The reader has found the version in its branch; its read
// of the files goes out only once the writer has dropped the version and deleted some or
// all of its files (MongoDB runs a delete document by document, with other clients'
// commands between). The read answers not found, never a part of the files.
func TestAVersionReadWhileItIsDroppedIsWholeOrGone(t *testing.T) {
	ctx := context.Background()
	uri := devstack.MongoForTestSerializing(t, wireproxy.Interleave).URI
	written, waiting := make(chan struct{}), make(chan struct{})
	writer, err := mongox.Connect(ctx, uri, nil)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := mongox.ConnectWith(ctx, uri, mongox.ConnectOptions{Observe: func(_ context.Context, e *event.CommandStartedEvent) {
		if coll, _ := e.Command.Lookup("find").StringValueOK(); coll == "branch_files" {
			close(waiting)
			<-written
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writer.Disconnect(ctx); _ = reader.Disconnect(ctx) })
	db := devstack.UniqueName(t, "dbt")
	w, r := mongostore.New(writer.Database(db)), mongostore.New(reader.Database(db))
	if err := w.EnsureIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	const dep, branch, files = int64(7), "dev", 60
	set := func(n int) []convert.File {
		out := make([]convert.File, files)
		for i := range out {
			out[i] = convert.File{Path: fmt.Sprintf("model/cubes/c%03d.yml", i), Content: fmt.Sprintf("cubes: [] # version %d", n)}
		}
		return out
	}
	now := time.Now().UTC()
	for n := 1; n <= dbtsync.KeptVersions; n++ {
		if _, _, err := w.WriteVersion(ctx, dep, branch, fmt.Sprintf("job-%d", n), set(n), now); err != nil {
			t.Fatal(err)
		}
	}
	type read struct {
		files []dbtsync.StoredFile
		err   error
	}
	done := make(chan read, 1)
	go func() {
		_, got, err := r.Files(ctx, dep, branch, 1, "", false)
		done <- read{got, err}
	}()
	<-waiting // the reader has found version 1 in its branch
	// The next version drops version 1 and deletes its files.
	_, _, err = w.WriteVersion(ctx, dep, branch, "job-next", set(dbtsync.KeptVersions+1), now)
	close(written)
	if err != nil {
		t.Fatal(err)
	}
	got := <-done
	if !errors.Is(got.err, dbtsync.ErrNotFound) {
		t.Fatalf("the read of the version being dropped: %d of its %d files, %v; want not found", len(got.files), files, got.err)
	}
}
