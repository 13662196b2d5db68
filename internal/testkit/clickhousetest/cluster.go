package clickhousetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ClusterName is the name StartCluster gives its cluster in remote_servers,
// the value of CLICKHOUSE_CLUSTER for a sink writing to it.
const ClusterName = "crawlhouse_shards"

// Cluster is a real sharded ClickHouse cluster on loopback: one server per
// shard (one replica each), each with its own data directory and a
// configuration whose remote_servers names every node's native port and
// whose macros say which shard and replica it is. The Distributed engine
// sends and reads across it as on a production cluster.
//
// What it cannot do: clickhouse-local has no Keeper and no interserver HTTP,
// so ON CLUSTER DDL and Replicated* engines do not run; the schema is
// applied to each node by itself (archive.MigrateNode).
type Cluster struct {
	// Name is the cluster's name in remote_servers.
	Name string

	mu      sync.Mutex
	nodes   []*Server
	dirs    []string
	ports   []int
	configs []string
}

// StartCluster starts a cluster of shards nodes and stops it when the test
// ends. A failure to start fails the test.
func StartCluster(t testing.TB, shards int) *Cluster {
	t.Helper()
	if shards < 1 {
		t.Fatalf("clickhousetest: a cluster needs at least one shard, not %d", shards)
	}
	root := t.TempDir()
	c := &Cluster{Name: ClusterName}
	ports, err := freePorts(shards)
	if err != nil {
		t.Fatalf("clickhousetest: %v", err)
	}
	c.ports = ports
	for i := range shards {
		dir := filepath.Join(root, fmt.Sprintf("shard%d", i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(dir, "config.xml")
		if err := os.WriteFile(cfg, []byte(clusterConfig(c.Name, ports, i)), 0o644); err != nil {
			t.Fatal(err)
		}
		c.dirs = append(c.dirs, dir)
		c.configs = append(c.configs, cfg)
		c.nodes = append(c.nodes, nil)
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			if err := c.Stop(i); err != nil {
				t.Errorf("clickhousetest: %v", err)
			}
		}
	})
	for i := range shards {
		if err := c.Start(i); err != nil {
			t.Fatalf("clickhousetest: shard %d: %v", i+1, err)
		}
	}
	return c
}

// clusterConfig is node self's configuration: every node is a shard of one
// replica at its native port. Background distributed sends are off in
// clickhouse-local (a pool size of 0 leaves an insert into a Distributed
// table queued for ever); a server runs them, so they are turned on.
func clusterConfig(name string, ports []int, self int) string {
	var b strings.Builder
	b.WriteString("<clickhouse>\n  <remote_servers>\n    <" + name + ">\n")
	for _, p := range ports {
		fmt.Fprintf(&b, "      <shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>\n", p)
	}
	b.WriteString("    </" + name + ">\n  </remote_servers>\n")
	fmt.Fprintf(&b, "  <macros><shard>%02d</shard><replica>replica%d</replica></macros>\n", self+1, self+1)
	b.WriteString("  <background_distributed_schedule_pool_size>4</background_distributed_schedule_pool_size>\n")
	b.WriteString("</clickhouse>\n")
	return b.String()
}

// freePorts picks n distinct free loopback ports below the kernel's
// ephemeral range, as scripts/clickhouse.sh does, so that no outgoing
// connection takes one before its node binds it.
func freePorts(n int) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for tries := 0; len(out) < n; tries++ {
		if tries > 200 {
			return nil, fmt.Errorf("no %d free loopback ports found", n)
		}
		p := 12000 + rand.IntN(20000)
		if seen[p] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}

// Shards is the number of nodes.
func (c *Cluster) Shards() int { return len(c.ports) }

// Addr is node i's native address (host:port); it stays the same across
// Stop and Start.
func (c *Cluster) Addr(i int) string { return "127.0.0.1:" + strconv.Itoa(c.ports[i]) }

// Addrs are every node's native addresses, comma-separated.
func (c *Cluster) Addrs() string {
	var a []string
	for i := range c.ports {
		a = append(a, c.Addr(i))
	}
	return strings.Join(a, ",")
}

// Start starts node i (again, after Stop) on its data directory and port.
// Starting a running node does nothing.
func (c *Cluster) Start(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i] != nil {
		return nil
	}
	s, err := StartWith(c.dirs[i], StartOptions{TCPPort: c.ports[i], ConfigFile: c.configs[i]})
	if err != nil {
		return err
	}
	c.nodes[i] = s
	return nil
}

// Stop stops node i cleanly; its data stays for Start. Stopping a stopped
// node does nothing.
func (c *Cluster) Stop(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.nodes[i]
	if s == nil {
		return nil
	}
	c.nodes[i] = nil
	return s.Stop()
}

// Open returns a connection to node i alone (database "default"), closed
// when the test ends.
func (c *Cluster) Open(t testing.TB, i int) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(Options(c.Addr(i), "default"))
	if err != nil {
		t.Fatalf("clickhousetest: open shard %d: %v", i+1, err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("clickhousetest: ping shard %d: %v", i+1, err)
	}
	return conn
}

// OpenAll opens a connection to every shard, in order, each closed when the
// test ends.
func (c *Cluster) OpenAll(t testing.TB) []driver.Conn {
	t.Helper()
	conns := make([]driver.Conn, c.Shards())
	for i := range conns {
		conns[i] = c.Open(t, i)
	}
	return conns
}
