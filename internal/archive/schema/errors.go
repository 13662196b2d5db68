package schema

import "errors"

// ErrLockLost is a migration or a retention change stopped
// because its migration lock ended while it held it: ClickHouse restarted,
// the connection broke, a limit stopped the lock's query. What it applied
// stays; the next run starts again from what is recorded.
var ErrLockLost = errors.New("lost the migration lock")

// codeQueryIDRunning is ClickHouse's QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING:
// another migrator holds the lock.
const codeQueryIDRunning = 216
