package delivery

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// copyObject copies the object name of bucket from into the bucket of to
// (created when missing) as dst, streaming it. found is false, with no
// error, when the source object does not exist.
func copyObject(ctx context.Context, js jetstream.JetStream, from, name string, to jetstream.ObjectStoreConfig, dst string) (found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, bodyTimeout)
	defer cancel()
	src, err := js.ObjectStore(ctx, from)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("object store %s: %w", from, err)
	}
	r, err := src.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s from %s: %w", name, from, err)
	}
	defer r.Close()
	obs, err := js.ObjectStore(ctx, to.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateOrUpdateObjectStore(ctx, to)
	}
	if err != nil {
		return false, fmt.Errorf("object store %s: %w", to.Bucket, err)
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: dst}, r); err != nil {
		return false, fmt.Errorf("write %s to %s: %w", dst, to.Bucket, err)
	}
	return true, nil
}

func objectExists(ctx context.Context, js jetstream.JetStream, bucket, name string) bool {
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return false
	}
	_, err = obs.GetInfo(ctx, name)
	return err == nil
}

func deleteObject(ctx context.Context, js jetstream.JetStream, bucket, name string) error {
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return err
	}
	if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return err
	}
	return nil
}
