package server

import "time"

// SetDrainWait replaces the timer that ends s's drain delay.
func SetDrainWait(s *Server, wait func(time.Duration) <-chan time.Time) { s.drainWait = wait }
