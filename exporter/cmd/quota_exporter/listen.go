//go:build linux

package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/net/netutil"
)

// listenAndServe is exporter-toolkit's web.ListenAndServe with each listener accepting at
// most maxConns connections at once (netutil.LimitListener; 0: no limit): beyond them new
// connections wait in the kernel's backlog. Every open connection costs a goroutine and its
// buffers, and a client that never reads holds one until --web.write-timeout; the limit
// bounds what many such clients cost. The listeners are made as the toolkit makes them
// (systemd socket activation, vsock:// or TCP addresses), which it does not let a caller wrap.
func listenAndServe(server *http.Server, flags *web.FlagConfig, maxConns int, logger *slog.Logger) error {
	var listeners []net.Listener
	switch {
	case flags.WebSystemdSocket != nil && *flags.WebSystemdSocket:
		logger.Info("Listening on systemd activated listeners instead of port listeners.")
		ls, err := activation.Listeners()
		if err != nil {
			return err
		}
		if len(ls) < 1 {
			return errors.New("no socket activation file descriptors found")
		}
		listeners = ls
	case flags.WebListenAddresses == nil || len(*flags.WebListenAddresses) == 0:
		return web.ErrNoListeners
	default:
		for _, address := range *flags.WebListenAddresses {
			l, err := listen(address)
			if err != nil {
				return err
			}
			defer l.Close()
			listeners = append(listeners, l)
		}
	}
	if maxConns > 0 {
		for i, l := range listeners {
			listeners[i] = netutil.LimitListener(l, maxConns)
		}
	}
	return web.ServeMultiple(listeners, server, flags, logger)
}

// listen listens on a TCP address, or on vsock://:<port>.
func listen(address string) (net.Listener, error) {
	if !strings.HasPrefix(address, "vsock://") {
		return net.Listen("tcp", address)
	}
	u, err := url.Parse(address)
	if err != nil {
		return nil, err
	}
	_, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 32)
	if err != nil {
		return nil, err
	}
	return vsock.Listen(uint32(p), nil)
}
