package mongostore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// pushDoc is a push webhook's delivery id or commit, claimed by the job it started
// (_id: "<deploymentId>/<key>"). A claim older than the retention is taken over by the
// next push that names it, so the collection holds one document per push the
// deployment's rate limit let through.
type pushDoc struct {
	ID  string    `bson:"_id"`
	Job string    `bson:"job"`
	At  time.Time `bson:"at"`
}

// ClaimPush records key of deploymentID for job unless another job claimed it within retention;
// it answers the job holding the claim. One single-document write decides: an insert
// (the unique _id), or a takeover of a claim older than the retention.
func (s *Store) ClaimPush(ctx context.Context, deploymentID int64, key, job string, now time.Time, retention time.Duration) (string, error) {
	id := strconv.FormatInt(deploymentID, 10) + "/" + key
	for range 3 {
		_, err := s.pushes.InsertOne(ctx, pushDoc{ID: id, Job: job, At: now})
		if err == nil {
			return job, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return "", wrap(err)
		}
		var d pushDoc
		err = s.pushes.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: id}, {Key: "at", Value: bson.D{{Key: "$lt", Value: now.Add(-retention)}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "job", Value: job}, {Key: "at", Value: now}}}},
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
		if err == nil {
			return d.Job, nil
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return "", wrap(err)
		}
		err = s.pushes.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
		if err == nil {
			return d.Job, nil
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return "", wrap(err)
		}
		// Released between the insert and the read: claim it again.
	}
	return "", errors.New("push claim contended")
}

// ReleasePush drops job's claim of key (its sync did not start).
func (s *Store) ReleasePush(ctx context.Context, deploymentID int64, key, job string) error {
	_, err := s.pushes.DeleteOne(ctx, bson.D{{Key: "_id", Value: strconv.FormatInt(deploymentID, 10) + "/" + key}, {Key: "job", Value: job}})
	return wrap(err)
}
