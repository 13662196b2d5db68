package main

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// cluster is a three-node JetStream cluster in this process, routed over
// loopback, every node syncing before it acknowledges (sync_interval:
// always, as production is configured).
type cluster struct {
	dir     string
	ports   []int // client ports
	routes  []int // cluster ports
	servers []*server.Server
}

const clusterSize = 3

func startCluster(dir string) (*cluster, error) {
	c := &cluster{dir: dir}
	for i := 0; i < clusterSize; i++ {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		r, err := freePort()
		if err != nil {
			return nil, err
		}
		c.ports, c.routes = append(c.ports, p), append(c.routes, r)
	}
	c.servers = make([]*server.Server, clusterSize)
	for i := range c.servers {
		if err := c.start(i); err != nil {
			c.shutdown()
			return nil, err
		}
	}
	for _, s := range c.servers {
		if !s.ReadyForConnections(20 * time.Second) {
			c.shutdown()
			return nil, fmt.Errorf("cluster node %s not ready", s.Name())
		}
	}
	return c, nil
}

// start (re)starts node i on its ports and store directory.
func (c *cluster) start(i int) error {
	var routes []*url.URL
	for j, r := range c.routes {
		if j != i {
			routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", r)})
		}
	}
	opts := &server.Options{
		ServerName: fmt.Sprintf("n%d", i+1),
		Host:       "127.0.0.1",
		Port:       c.ports[i],
		JetStream:  true,
		StoreDir:   filepath.Join(c.dir, fmt.Sprintf("n%d", i+1)),
		SyncAlways: true,
		NoSigs:     true,
		NoLog:      true,
		Cluster: server.ClusterOpts{
			Name: "crawlhouse-soak",
			Host: "127.0.0.1",
			Port: c.routes[i],
		},
		Routes: routes,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("cluster node %d: %w", i+1, err)
	}
	s.Start()
	c.servers[i] = s
	return nil
}

// url is node i's client URL.
func (c *cluster) url(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.ports[i%clusterSize])
}

// urls lists every node, for clients that may use any.
func (c *cluster) urls() string {
	var u []string
	for i := range c.ports {
		u = append(u, c.url(i))
	}
	return strings.Join(u, ",")
}

// waitStream waits until the stream exists with a leader and all replicas
// current.
func (c *cluster) waitStream(ctx context.Context, name string, timeout time.Duration) error {
	nc, err := nats.Connect(c.urls())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s, err := js.Stream(ctx, name)
		if err == nil {
			info := s.CachedInfo()
			if info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == clusterSize-1 {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("stream %s has no leader with %d replicas after %s", name, clusterSize, timeout)
}

// stopLeader shuts down the node that leads stream name and returns its
// index.
func (c *cluster) stopLeader(ctx context.Context, name string) (int, error) {
	nc, err := nats.Connect(c.urls())
	if err != nil {
		return -1, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return -1, err
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		return -1, err
	}
	info := s.CachedInfo()
	if info.Cluster == nil {
		return -1, fmt.Errorf("stream %s is not clustered", name)
	}
	for i, srv := range c.servers {
		if srv != nil && srv.Name() == info.Cluster.Leader {
			srv.Shutdown()
			srv.WaitForShutdown()
			c.servers[i] = nil
			return i, nil
		}
	}
	return -1, fmt.Errorf("leader %q is none of the nodes", info.Cluster.Leader)
}

func (c *cluster) shutdown() {
	for i, s := range c.servers {
		if s != nil {
			s.Shutdown()
			s.WaitForShutdown()
			c.servers[i] = nil
		}
	}
}
