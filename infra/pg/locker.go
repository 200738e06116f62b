package pg

import (
	"github.com/pressly/goose/v3/lock"
)

// migrationLockID is the advisory lock key goose holds while migrating; any constant works
// as long as every process uses the same one.
const migrationLockID = 7_366_104_221

func newLocker() (lock.SessionLocker, error) {
	return lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID))
}
