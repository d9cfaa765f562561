package check

import (
	"io"
	"log"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-hclog"
)

// hcLogger hands go-plugin's logging, and with it every line a plugin writes to stderr, to the
// controller's logr logger. hclog's trace and debug become V(2) and V(1); warnings stay
// info-level entries marked "level":"warn", since logr has no warning level. go-plugin's own
// info messages ("plugin process exited", once per attempt) are debug: only what the plugin
// itself logs at info (its logger is named after the binary) stays at info.
type hcLogger struct {
	log     logr.Logger
	name    string
	implied []any
}

var _ hclog.Logger = (*hcLogger)(nil)

func newHCLogger(l logr.Logger) hclog.Logger { return &hcLogger{log: l} }

func (h *hcLogger) Log(level hclog.Level, msg string, args ...any) {
	l := h.log
	if h.name != "" {
		l = l.WithValues("logger", h.name)
	}
	kv := append(append([]any{}, h.implied...), args...)
	switch level {
	case hclog.Off:
	case hclog.Trace:
		l.V(2).Info(msg, kv...)
	case hclog.Debug, hclog.NoLevel:
		l.V(1).Info(msg, kv...)
	case hclog.Warn:
		l.Info(msg, append(kv, "level", "warn")...)
	case hclog.Error:
		l.Error(nil, msg, kv...)
	case hclog.Info:
		if h.name == "" {
			l.V(1).Info(msg, kv...)
			return
		}
		l.Info(msg, kv...)
	default:
		l.Info(msg, kv...)
	}
}

func (h *hcLogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hcLogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hcLogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hcLogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hcLogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hcLogger) IsTrace() bool { return h.log.V(2).Enabled() }
func (h *hcLogger) IsDebug() bool { return h.log.V(1).Enabled() }
func (h *hcLogger) IsInfo() bool  { return h.log.Enabled() }
func (h *hcLogger) IsWarn() bool  { return h.log.Enabled() }
func (h *hcLogger) IsError() bool { return true }

func (h *hcLogger) ImpliedArgs() []any { return h.implied }

func (h *hcLogger) With(args ...any) hclog.Logger {
	return &hcLogger{log: h.log, name: h.name, implied: append(append([]any{}, h.implied...), args...)}
}

func (h *hcLogger) Name() string { return h.name }

func (h *hcLogger) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return &hcLogger{log: h.log, name: name, implied: h.implied}
}

func (h *hcLogger) ResetNamed(name string) hclog.Logger {
	return &hcLogger{log: h.log, name: name, implied: h.implied}
}

// SetLevel is ignored: the logr sink decides what is shown.
func (h *hcLogger) SetLevel(hclog.Level) {}

func (h *hcLogger) GetLevel() hclog.Level {
	switch {
	case h.IsTrace():
		return hclog.Trace
	case h.IsDebug():
		return hclog.Debug
	default:
		return hclog.Info
	}
}

func (h *hcLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hcLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return &lineLogger{log: h.log, stream: "log"}
}
