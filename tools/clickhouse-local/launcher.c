/*
 * launcher: run clickhouse-local from libchdb.so (the ClickHouse engine as a
 * shared library, shipped by the npm package @chdb/lib-linux-x64-gnu) as a
 * long-lived local server, without Docker or a ClickHouse server package.
 * scripts/clickhouse.sh builds and drives it; see there for the usual use.
 *
 * Usage:
 *   launcher [--lib=PATH/libchdb.so] [--relay=PORT:UPSTREAM_PORT]
 *            [--stop-on-stdin-eof] [--] CLICKHOUSE-LOCAL-ARGS...
 *
 * The library path comes from --lib=PATH, else $LIBCHDB_PATH. Every argument
 * after the launcher's own options is forwarded verbatim to clickhouse-local.
 * query_stable_v2 takes a full argv whose argv[0] is a program name and is
 * ignored, so the launcher puts "clickhouse" there.
 *
 * Stop contract. clickhouse-local ignores SIGINT and does not handle SIGTERM
 * (the default action would kill it mid-write), so the launcher forks:
 *   - the child loads libchdb and runs clickhouse-local with its stdin
 *     connected to a pipe whose only writer is the parent;
 *   - the parent waits. On SIGTERM, SIGINT or SIGHUP it closes the pipe, so a
 *     query that reads stdin to the end, e.g.
 *       SELECT count() FROM file('/dev/stdin', 'LineAsString') FORMAT Null
 *     as the last statement of --query, finishes, and clickhouse-local shuts
 *     down normally (parts written, metadata synced, data-dir lock released).
 *     A second signal kills the child with SIGKILL.
 *   - with --stop-on-stdin-eof, EOF (or an error) on the parent's own stdin
 *     is a stop request too: a caller holding the write end of a pipe gets
 *     the server stopped when it exits, however it exits.
 *   - if the parent dies (even by SIGKILL) the child is killed too
 *     (PR_SET_PDEATHSIG), so no orphan keeps the ports or the data dir.
 * The parent exits with the child's exit status (128+N if killed by signal N).
 *
 * Why the relay. In clickhouse-local 26.7 a native-protocol connection that
 * the client resets (RST: a client killed, or one closing a socket with
 * unread data, as clickhouse-go does when a query is cancelled) while the
 * server waits for its next packet raises an exception that reaches Poco's
 * error handler, which in clickhouse-local terminates the whole process.
 * clickhouse-server installs a handler that ignores such errors; libchdb
 * exposes no way to install one. With --relay=PORT:UPSTREAM_PORT the parent
 * accepts native connections on 127.0.0.1:PORT and relays them to
 * clickhouse-local's tcp_port UPSTREAM_PORT, turning a client's reset into
 * an orderly close (FIN, then draining the server's output), which the
 * server handles as a client that went away.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* From chdb's chdb.h (the header is not shipped in the npm package). */
struct local_result_v2 {
	char *buf;
	size_t len;
	void *_vec;
	double elapsed;
	uint64_t rows_read;
	uint64_t bytes_read;
	char *error_message;
};
typedef struct local_result_v2 *(*query_stable_v2_fn)(int argc, char **argv);
typedef void (*free_result_v2_fn)(struct local_result_v2 *result);

static volatile sig_atomic_t stop_requests;
static volatile sig_atomic_t stop_fd = -1;
static volatile pid_t child_pid = -1;

/* request_stop is async-signal-safe: first call closes the child's stdin,
 * any later one kills the child. */
static void request_stop(void)
{
	if (stop_requests++ == 0) {
		if (stop_fd >= 0) {
			close(stop_fd);
			stop_fd = -1;
		}
	} else if (child_pid > 0) {
		kill(child_pid, SIGKILL);
	}
}

static void on_stop_signal(int sig)
{
	(void)sig;
	request_stop();
}

/* ---- native-protocol relay ------------------------------------------- */

struct relay_conn {
	int client, upstream;
	int refs; /* two copier threads; the last one closes and frees */
};

static int upstream_port;

static void conn_release(struct relay_conn *k)
{
	if (__atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		close(k->client);
		close(k->upstream);
		free(k);
	}
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* client -> server. Whatever ends the client side (EOF, reset, error), the
 * server only ever sees a FIN. */
static void *copy_client_to_upstream(void *arg)
{
	struct relay_conn *k = arg;
	char buf[65536];
	for (;;) {
		ssize_t r = read(k->client, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || send_all(k->upstream, buf, (size_t)r) != 0)
			break;
	}
	shutdown(k->upstream, SHUT_WR);
	conn_release(k);
	return NULL;
}

/* server -> client. If the client is gone, keep reading and discarding until
 * the server closes, so the server is never reset either. */
static void *copy_upstream_to_client(void *arg)
{
	struct relay_conn *k = arg;
	char buf[65536];
	int client_ok = 1;
	for (;;) {
		ssize_t r = read(k->upstream, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (client_ok && send_all(k->client, buf, (size_t)r) != 0)
			client_ok = 0;
	}
	/* Server done: flush what is queued to the client, and wake the other
	 * copier if it is still blocked reading the client. */
	shutdown(k->client, SHUT_RDWR);
	conn_release(k);
	return NULL;
}

static int listen_loopback(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 512) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int connect_upstream(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)upstream_port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void *relay_accept_loop(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	int one = 1;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				usleep(100 * 1000);
			continue;
		}
		int u = connect_upstream();
		if (u < 0) { /* server not (yet) listening: refuse */
			close(c);
			continue;
		}
		/* clickhouse-go writes small packets; Nagle would add delays. */
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		struct relay_conn *k = calloc(1, sizeof *k);
		if (!k) {
			close(c);
			close(u);
			continue;
		}
		k->client = c;
		k->upstream = u;
		k->refs = 2;
		pthread_t t;
		if (pthread_create(&t, &attr, copy_client_to_upstream, k) != 0) {
			free(k);
			close(c);
			close(u);
			continue;
		}
		if (pthread_create(&t, &attr, copy_upstream_to_client, k) != 0) {
			/* Unblock and finish the first copier; it releases one ref. */
			shutdown(c, SHUT_RDWR);
			conn_release(k);
		}
	}
	return NULL;
}

/* ---- child: clickhouse-local ----------------------------------------- */

static int run_clickhouse_local(const char *lib, int argc, char **argv)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "launcher: dlopen %s: %s\n", lib, dlerror());
		return 127;
	}
	query_stable_v2_fn query = (query_stable_v2_fn)dlsym(h, "query_stable_v2");
	free_result_v2_fn free_result = (free_result_v2_fn)dlsym(h, "free_result_v2");
	if (!query) {
		fprintf(stderr, "launcher: %s has no query_stable_v2\n", lib);
		return 127;
	}

	char **args = calloc((size_t)argc + 2, sizeof(char *));
	if (!args) {
		perror("launcher: calloc");
		return 1;
	}
	args[0] = "clickhouse";
	for (int i = 0; i < argc; i++)
		args[i + 1] = argv[i];

	struct local_result_v2 *res = query(argc + 1, args);
	if (!res) {
		fprintf(stderr, "launcher: query_stable_v2 returned no result\n");
		return 1;
	}
	int rc = 0;
	if (res->buf && res->len > 0)
		fwrite(res->buf, 1, res->len, stdout);
	if (res->error_message && res->error_message[0]) {
		fprintf(stderr, "launcher: clickhouse-local: %s\n", res->error_message);
		rc = 1;
	}
	if (free_result)
		free_result(res);
	return rc;
}

/* ---- parent: waiting --------------------------------------------------- */

static void block_stop_signals(sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, old);
}

/* wait_child waits for the child; with watch_stdin, EOF or an error on stdin
 * is a stop request. */
static int wait_child(pid_t pid, int watch_stdin, int *status)
{
	for (;;) {
		pid_t w = waitpid(pid, status, watch_stdin ? WNOHANG : 0);
		if (w == pid)
			return 0;
		if (w < 0 && errno != EINTR)
			return -1;
		if (!watch_stdin)
			continue;
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		if (poll(&pfd, 1, 200) <= 0)
			continue; /* timeout, or interrupted by a signal */
		char buf[512];
		ssize_t r = (pfd.revents & POLLIN) ? read(STDIN_FILENO, buf, sizeof buf) : 0;
		if (r > 0 || (r < 0 && errno == EINTR))
			continue; /* input is ignored */
		watch_stdin = 0;
		sigset_t old;
		block_stop_signals(&old);
		if (stop_requests == 0)
			request_stop();
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
}

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [--lib=PATH/libchdb.so] [--relay=PORT:UPSTREAM_PORT] "
		"[--stop-on-stdin-eof] [--] CLICKHOUSE-LOCAL-ARGS...\n"
		"       (or set LIBCHDB_PATH)\n",
		prog);
}

int main(int argc, char **argv)
{
	const char *lib = getenv("LIBCHDB_PATH");
	int watch_stdin = 0, relay_port = 0;
	int first = 1;
	for (; first < argc; first++) {
		const char *a = argv[first];
		if (strncmp(a, "--lib=", 6) == 0) {
			lib = a + 6;
		} else if (strncmp(a, "--relay=", 8) == 0) {
			if (sscanf(a + 8, "%d:%d", &relay_port, &upstream_port) != 2 ||
			    relay_port <= 0 || relay_port > 65535 || upstream_port <= 0 ||
			    upstream_port > 65535) {
				usage(argv[0]);
				return 2;
			}
		} else if (strcmp(a, "--stop-on-stdin-eof") == 0) {
			watch_stdin = 1;
		} else {
			if (strcmp(a, "--") == 0)
				first++;
			break;
		}
	}
	if (!lib || !*lib) {
		usage(argv[0]);
		return 2;
	}

	int relay_fd = -1;
	if (relay_port) {
		relay_fd = listen_loopback(relay_port);
		if (relay_fd < 0) {
			fprintf(stderr, "launcher: listen on 127.0.0.1:%d: %s\n", relay_port, strerror(errno));
			return 1;
		}
	}

	int p[2];
	if (pipe(p) != 0) {
		perror("launcher: pipe");
		return 1;
	}

	/* Stop signals stay blocked until the handlers and child_pid are set. */
	sigset_t oldset;
	block_stop_signals(&oldset);

	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		perror("launcher: fork");
		return 1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent) /* parent already gone */
			_exit(1);
		/* A Ctrl-C in a terminal reaches the whole process group; the
		 * parent turns it into a graceful stop, so the child ignores it. */
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGTERM, SIG_DFL);
		sigprocmask(SIG_SETMASK, &oldset, NULL);
		if (relay_fd >= 0)
			close(relay_fd);
		close(p[1]);
		if (dup2(p[0], STDIN_FILENO) < 0) {
			perror("launcher: dup2");
			_exit(1);
		}
		close(p[0]);
		int rc = run_clickhouse_local(lib, argc - first, argv + first);
		fflush(stdout);
		fflush(stderr);
		/* clickhouse-local has shut down when query_stable_v2 returns;
		 * skip the library's static destructors. */
		_exit(rc);
	}

	close(p[0]);
	child_pid = pid;
	stop_fd = p[1];
	if (relay_fd >= 0) {
		/* Threads inherit the blocked stop signals: only main handles them. */
		pthread_t t;
		int err = pthread_create(&t, NULL, relay_accept_loop, (void *)(intptr_t)relay_fd);
		if (err != 0) {
			fprintf(stderr, "launcher: relay thread: %s\n", strerror(err));
			kill(pid, SIGKILL);
			return 1;
		}
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigprocmask(SIG_SETMASK, &oldset, NULL);

	int status = 0;
	if (wait_child(pid, watch_stdin, &status) != 0) {
		perror("launcher: waitpid");
		return 1;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "launcher: clickhouse-local killed by signal %d\n", WTERMSIG(status));
		return 128 + WTERMSIG(status);
	}
	return 1;
}
