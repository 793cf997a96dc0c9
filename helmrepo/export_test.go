package helmrepo

import "time"

// SetClock makes f age its indexes by now.
func SetClock(f *Fetcher, now func() time.Time) { f.now = now }
