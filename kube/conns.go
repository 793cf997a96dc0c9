package kube

import (
	"context"
	"net"
	"sync"
)

// connections are the connections one Cluster's transport opened, closed all
// together when the cluster is: closing only the idle ones leaves a connection
// whose last stream (a watch just stopped) is still ending open, with its read
// loop, until the transport's idle timeout. Once closed, the cluster opens no
// more: a call made with it then fails with ErrClosed. A cluster whose
// credentials were replaced closes them, without refusing more, once nothing
// uses it (see Cluster.retire).
type connections struct {
	mu     sync.Mutex
	open   map[*trackedConn]struct{}
	closed bool
}

func newConnections() *connections { return &connections{open: map[*trackedConn]struct{}{}} }

// dialer is dial with every connection it opens kept until it is closed.
func (cs *connections) dialer(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		cs.mu.Lock()
		closed := cs.closed
		cs.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: conn, cs: cs}
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if cs.closed {
			conn.Close()
			return nil, ErrClosed
		}
		cs.open[tc] = struct{}{}
		return tc, nil
	}
}

// close closes every connection and refuses new ones. The transport sees each
// closed connection fail its next read and drops it from its pool.
func (cs *connections) close() {
	cs.mu.Lock()
	cs.closed = true
	cs.mu.Unlock()
	cs.closeOpen()
}

// closeOpen closes every connection open now; later dials still connect.
func (cs *connections) closeOpen() {
	cs.mu.Lock()
	open := make([]*trackedConn, 0, len(cs.open))
	for c := range cs.open {
		open = append(open, c)
	}
	cs.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	cs   *connections
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.cs.mu.Lock()
		delete(c.cs.open, c)
		c.cs.mu.Unlock()
	})
	return err
}
