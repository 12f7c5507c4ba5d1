// Command etcd runs a single-member etcd server for the envtest suite (make envtest).
// It wraps go.etcd.io/etcd/server/v3/embed with etcd's own flag names and stops cleanly on SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func urls(flagName, value string) []url.URL {
	var out []url.URL
	for _, raw := range strings.Split(value, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.Host == "" {
			log.Fatalf("--%s: %q is not a URL like http://127.0.0.1:2379", flagName, raw)
		}
		out = append(out, *u)
	}
	return out
}

func main() {
	cfg := embed.NewConfig()
	flag.StringVar(&cfg.Name, "name", "default", "member name")
	flag.StringVar(&cfg.Dir, "data-dir", "default.etcd", "path to the data directory")
	listenClient := flag.String("listen-client-urls", "http://127.0.0.1:2379", "URLs to serve clients on")
	advertiseClient := flag.String("advertise-client-urls", "", "client URLs to advertise (default: --listen-client-urls)")
	listenPeer := flag.String("listen-peer-urls", "http://127.0.0.1:2380", "URLs to serve the peer protocol on")
	flag.StringVar(&cfg.LogLevel, "log-level", "warn", "debug, info, warn or error")
	flag.BoolVar(&cfg.UnsafeNoFsync, "unsafe-no-fsync", false, "skip fsync (tests only: data may be lost on a crash)")
	flag.Parse()
	if flag.NArg() > 0 {
		log.Fatalf("unexpected arguments: %v", flag.Args())
	}
	if *advertiseClient == "" {
		*advertiseClient = *listenClient
	}
	cfg.ListenClientUrls = urls("listen-client-urls", *listenClient)
	cfg.AdvertiseClientUrls = urls("advertise-client-urls", *advertiseClient)
	cfg.ListenPeerUrls = urls("listen-peer-urls", *listenPeer)
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready, serving clients on %s\n", *listenClient)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		log.Fatal("etcd: not ready within 60s")
	case <-ctx.Done():
		e.Close()
		return
	}
	select {
	case <-ctx.Done():
		e.Close()
	case err := <-e.Err():
		e.Close()
		log.Fatalf("etcd: %v", err)
	}
}
