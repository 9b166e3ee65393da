package server

import (
	"context"
	"log/slog"
	"net"
)

// connLog logs for one connection with its client id and remote address.
// The attributes are formatted only when a line is actually written: most
// connections log nothing, and slog.Logger.With formats them at once.
type connLog struct {
	base   *slog.Logger
	id     string
	remote net.Addr
	with   *slog.Logger
}

func (l *connLog) log(level slog.Level, msg string, args ...any) {
	if !l.base.Enabled(context.Background(), level) {
		return
	}
	if l.with == nil {
		l.with = l.base.With("client_id", l.id, "remote", l.remote.String())
	}
	l.with.Log(context.Background(), level, msg, args...)
}

func (l *connLog) Debug(msg string, args ...any) { l.log(slog.LevelDebug, msg, args...) }
func (l *connLog) Info(msg string, args ...any)  { l.log(slog.LevelInfo, msg, args...) }
func (l *connLog) Warn(msg string, args ...any)  { l.log(slog.LevelWarn, msg, args...) }
func (l *connLog) Error(msg string, args ...any) { l.log(slog.LevelError, msg, args...) }
