// Command demo-app is the program of the image nestlet.local/demo-app that
// real leaves run in the tests and the demo. Without arguments it serves
// HTTP on --port (or $PORT, default 8080): every request is logged to
// stdout, /healthz answers "ok" (503 until --ready-after), any other path answers "hello from
// <hostname>". Told by --exit-after/--exit-code (or $EXIT_AFTER and
// $EXIT_CODE) it exits with that code after that long, so that tests see a
// container crash, restart or complete.
//
// With a command as its first argument it is a small multi-call tool, so
// that `kubectl exec` has something to run in an image without a shell:
// hostname, env, echo ARGS..., cat [FILE...] (stdin without files),
// write FILE TEXT..., ls [DIR], exit CODE, get URL (an HTTP GET: prints the body, fails unless
// 200 within 5 s), resolve NAME (its addresses through the pod's DNS),
// and for the benchmarks: latency URL COUNT (COUNT GETs one after another
// on one connection, after one to open it: prints their p50 and p99 in
// microseconds), fetch URL (a GET whose body is counted and dropped:
// prints the bytes and the seconds) and kube PATH COUNT (latency of GETs
// on the pod's own API server, as its service account; kube PATH prints
// one answer). /bytes/N answers N bytes.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		os.Exit(tool(os.Args[1], os.Args[2:]))
	}
	port := flag.String("port", envOr("PORT", "8080"), "port to serve HTTP on ($PORT)")
	exitAfter := flag.Duration("exit-after", durationEnv("EXIT_AFTER"), "exit this long after start, 0 for never ($EXIT_AFTER, e.g. 5s)")
	exitCode := flag.Int("exit-code", intEnv("EXIT_CODE"), "the code to exit with after --exit-after ($EXIT_CODE)")
	readyAfter := flag.Duration("ready-after", durationEnv("READY_AFTER"), "answer /healthz with 503 until this long after start ($READY_AFTER)")
	flag.Parse()
	started := time.Now()

	host, _ := os.Hostname()
	fmt.Printf("demo-app: listening on :%s as %s\n", *port, host)
	if *exitAfter > 0 {
		time.AfterFunc(*exitAfter, func() {
			fmt.Printf("demo-app: exiting with code %d after %s\n", *exitCode, *exitAfter)
			os.Exit(*exitCode)
		})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if time.Since(started) < *readyAfter {
			http.Error(w, "not ready yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", host)
	})
	mux.HandleFunc("/bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "bytes: a count", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		chunk := make([]byte, 64<<10)
		for n > 0 {
			k := min(n, int64(len(chunk)))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	// One long TCP stream: a numbered line every 100 ms for s seconds,
	// then "end N" (demo-app stream reads it and checks every line came).
	mux.HandleFunc("/stream/{s}", func(w http.ResponseWriter, r *http.Request) {
		secs, err := strconv.Atoi(r.PathValue("s"))
		if err != nil || secs < 0 || secs > 3600 {
			http.Error(w, "stream: seconds, at most 3600", http.StatusBadRequest)
			return
		}
		flusher, _ := w.(http.Flusher)
		n := secs * 10
		for i := range n {
			if _, err := fmt.Fprintf(w, "line %d\n", i); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			time.Sleep(100 * time.Millisecond)
		}
		fmt.Fprintf(w, "end %d\n", n)
	})
	// CPU on demand, for autoscaling: each request spins a core for ms.
	mux.HandleFunc("/burn/{ms}", func(w http.ResponseWriter, r *http.Request) {
		ms, err := strconv.Atoi(r.PathValue("ms"))
		if err != nil || ms < 0 || ms > 10_000 {
			http.Error(w, "burn: milliseconds, at most 10000", http.StatusBadRequest)
			return
		}
		n := 0
		for end := time.Now().Add(time.Duration(ms) * time.Millisecond); time.Now().Before(end); {
			n++
		}
		fmt.Fprintf(w, "burnt %d ms on %s\n", ms, host)
	})
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("demo-app: %s %s from %s\n", r.Method, r.URL.Path, r.RemoteAddr)
		mux.ServeHTTP(w, r)
	})
	srv := &http.Server{Addr: ":" + *port, Handler: logged, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "demo-app:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func durationEnv(key string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(key))
	return d
}

func intEnv(key string) int {
	n, _ := strconv.Atoi(os.Getenv(key))
	return n
}

// tool runs one of the exec commands and returns its exit code.
func tool(cmd string, args []string) int {
	switch cmd {
	case "hostname":
		h, _ := os.Hostname()
		fmt.Println(h)
	case "env":
		for _, e := range os.Environ() {
			fmt.Println(e)
		}
	case "echo":
		fmt.Println(strings.Join(args, " "))
	case "cat":
		return cat(args)
	case "write": // write FILE TEXT...: the words, then a newline
		if len(args) < 1 {
			fmt.Fprintln(os.Stderr, "usage: write FILE TEXT...")
			return 2
		}
		if err := os.WriteFile(args[0], []byte(strings.Join(args[1:], " ")+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case "ls":
		dir := "."
		if len(args) > 0 {
			dir = args[0]
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, e := range ents {
			fmt.Println(e.Name())
		}
	case "get":
		if len(args) != 1 {
			fmt.Fprintln(os.Stderr, "usage: demo-app get URL")
			return 2
		}
		return get(args[0])
	case "resolve":
		if len(args) != 1 {
			fmt.Fprintln(os.Stderr, "usage: demo-app resolve NAME")
			return 2
		}
		return resolve(args[0])
	case "latency":
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, "usage: demo-app latency URL COUNT")
			return 2
		}
		return latency(args[0], args[1])
	case "fetch":
		if len(args) != 1 {
			fmt.Fprintln(os.Stderr, "usage: demo-app fetch URL")
			return 2
		}
		return fetch(args[0])
	case "until":
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, "usage: demo-app until URL SECONDS")
			return 2
		}
		return until(args[0], args[1])
	case "kube":
		switch len(args) {
		case 1:
			return kube(args[0])
		case 2:
			return kubeLatency(args[0], args[1])
		}
		fmt.Fprintln(os.Stderr, "usage: demo-app kube PATH [COUNT]")
		return 2
	case "stream":
		if len(args) != 1 {
			fmt.Fprintln(os.Stderr, "usage: demo-app stream URL (a server's /stream/SECONDS)")
			return 2
		}
		return stream(args[0])
	case "load":
		if len(args) != 1 {
			fmt.Fprintln(os.Stderr, "usage: demo-app load URL")
			return 2
		}
		return load(args[0])
	case "exit":
		if len(args) != 1 {
			fmt.Fprintln(os.Stderr, "usage: demo-app exit CODE")
			return 2
		}
		code, err := strconv.Atoi(args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		return code
	default:
		fmt.Fprintf(os.Stderr, "demo-app: unknown command %q (hostname, env, echo, cat, ls, exit, get, resolve, latency, fetch, until, load, kube)\n", cmd)
		return 127
	}
	return 0
}

// cat copies the files, or stdin without any, to stdout.
func cat(files []string) int {
	if len(files) == 0 {
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_, _ = os.Stdout.Write(b)
	}
	return 0
}

// get fetches url and prints the body; 0 only for a 200 answer.
func get(url string) int {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(os.Stdout, resp.Body)
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "demo-app: "+resp.Status)
		return 1
	}
	return 0
}

// stream reads a server's /stream/SECONDS to its end on one connection
// and says whether every line came, in order: 0 when they did.
func stream(url string) int {
	start := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = resp.Body.Close() }()
	s := bufio.NewScanner(resp.Body)
	next, longest, last := 0, time.Duration(0), time.Now()
	for s.Scan() {
		if gap := time.Since(last); gap > longest {
			longest = gap
		}
		last = time.Now()
		var n int
		if _, err := fmt.Sscanf(s.Text(), "end %d", &n); err == nil {
			if n != next {
				fmt.Printf("stream: broken: %d lines of %d\n", next, n)
				return 1
			}
			fmt.Printf("stream: intact: %d lines in %s on one connection, longest gap %s\n", n, time.Since(start).Round(time.Millisecond), longest.Round(time.Millisecond))
			return 0
		}
		if s.Text() != fmt.Sprintf("line %d", next) {
			fmt.Printf("stream: broken: line %d is %q\n", next, s.Text())
			return 1
		}
		next++
	}
	fmt.Printf("stream: broken after %d lines: %v\n", next, s.Err())
	return 1
}

// resolve prints the addresses name resolves to through the pod's
// /etc/resolv.conf (its search path and the cluster DNS), one a line.
func resolve(name string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := (&net.Resolver{PreferGo: true}).LookupHost(ctx, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, a := range addrs {
		fmt.Println(a)
	}
	return 0
}

// latency GETs url count times on one connection (after one GET that opens
// it) and prints the p50 and p99 of their durations in microseconds.
func latency(url, count string) int {
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "demo-app: COUNT must be a positive number")
		return 2
	}
	client := &http.Client{Timeout: 5 * time.Second}
	once := func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	}
	return measure(n, once)
}

// measure calls once to open the connection, then n times, and prints
// the p50 and p99 of those n in microseconds; it fails on the first error.
func measure(n int, once func() error) int {
	if err := once(); err != nil {
		fmt.Fprintln(os.Stderr, "demo-app:", err)
		return 1
	}
	took := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := once(); err != nil {
			fmt.Fprintln(os.Stderr, "demo-app:", err)
			return 1
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	at := func(q float64) int64 { return took[min(len(took)-1, int(q*float64(len(took))))].Microseconds() }
	fmt.Println(at(0.50), at(0.99))
	return 0
}

// fetch GETs url, counts and drops the body, and prints the bytes and the
// seconds it took.
func fetch(url string) int {
	start := time.Now()
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "demo-app:", resp.Status, err)
		return 1
	}
	fmt.Println(n, time.Since(start).Seconds())
	return 0
}

// until GETs url every 20 ms, each within 200 ms, until one is answered
// 200 or seconds have passed; it prints when the first answer came, in
// nanoseconds since the Unix epoch.
func until(url, seconds string) int {
	s, err := strconv.Atoi(seconds)
	if err != nil || s < 1 {
		fmt.Fprintln(os.Stderr, "demo-app: SECONDS must be a positive number")
		return 2
	}
	client := &http.Client{Timeout: 200 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(time.Duration(s) * time.Second)
	for time.Now().Before(deadline) {
		start := time.Now()
		if resp, err := client.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				fmt.Println(time.Now().UnixNano())
				return 0
			}
		}
		time.Sleep(max(0, 20*time.Millisecond-time.Since(start)))
	}
	fmt.Fprintf(os.Stderr, "demo-app: no answer from %s in %ss\n", url, seconds)
	return 1
}

// load GETs url over and over until it is killed, as a load generator:
// one request at a time, each within 10 s, 100 ms apart. It prints how
// many were answered every 100.
func load(url string) int {
	client := &http.Client{Timeout: 10 * time.Second}
	answered := 0
	for {
		time.Sleep(100 * time.Millisecond)
		resp, err := client.Get(url)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if answered++; answered%100 == 0 {
			fmt.Printf("demo-app: %d requests answered\n", answered)
		}
	}
}

// kube GETs path from the API server as a pod's in-cluster client does:
// at $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, verified with the
// mounted CA, with the mounted token (read at each call: it is rotated).
// It prints the HTTP status code, then the body; it fails unless 2xx.
func kube(path string) int {
	do, err := kubeClient(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo-app:", err)
		return 1
	}
	code, body, err := do()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo-app:", err)
		return 1
	}
	fmt.Printf("%d\n%s\n", code, body)
	if code/100 != 2 {
		return 1
	}
	return 0
}

// kubeLatency GETs path COUNT times, one after another on one connection,
// after one to open it, and prints their p50 and p99 in microseconds; it
// fails on any answer but 200.
func kubeLatency(path, count string) int {
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "demo-app: COUNT must be a positive number")
		return 2
	}
	do, err := kubeClient(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo-app:", err)
		return 1
	}
	once := func() error {
		code, body, err := do()
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%d: %s", code, body)
		}
		return err
	}
	return measure(n, once)
}

// kubeClient returns a GET of path on the pod's API server, as its
// service account: the token and CA its kubelet mounted, the address in
// KUBERNETES_SERVICE_HOST and _PORT.
func kubeClient(path string) (func() (int, []byte, error), error) {
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount/"
	ca, err := os.ReadFile(dir + "ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", dir+"ca.crt")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	url := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) + path
	return func() (int, []byte, error) {
		token, err := os.ReadFile(dir + "token") // read each time, as clients do: it is refreshed
		if err != nil {
			return 0, nil, err
		}
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}, nil
}
