// Command misbehave is a check plugin for the controller's tests: config["mode"] picks how it
// goes wrong, so one binary covers every failure the runner must survive.
//
//	panic   panics inside Check (the plugin process dies with a stack trace)
//	exit    exits with status 2 inside Check, without a word
//	hang    never answers, ignoring cancellation
//	error   returns an error: the check could not be carried out
//	log     writes to stderr, then passes
//	echo    passes, with the request as its message
//	env     passes, with the names of the environment variables it sees as its message
//	long    passes, with a 64 KiB message full of control characters
//	read    passes, saying whether it could read config["path"], its own binary's directory and
//	        /etc/passwd (the controller's sandbox test)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stagecoach-dev/stagecoach/plugin/check"
)

type misbehave struct{}

func (misbehave) Check(_ context.Context, req check.Request) (check.Result, error) {
	switch mode := req.Config["mode"]; mode {
	case "panic":
		panic("misbehave: told to panic")
	case "exit":
		os.Exit(2)
	case "hang":
		select {}
	case "error":
		return check.Result{}, errors.New("misbehave: told to fail")
	case "log":
		log.Printf("[WARN] misbehave: checking %s", req.Digest)
		fmt.Fprintln(os.Stderr, "misbehave: via os.Stderr")
		return check.Result{Passed: true, Message: "logged"}, nil
	case "env":
		var names []string
		for _, kv := range os.Environ() {
			name, _, _ := strings.Cut(kv, "=")
			names = append(names, name)
		}
		sort.Strings(names)
		return check.Result{Passed: true, Message: "env: " + strings.Join(names, ",")}, nil
	case "long":
		return check.Result{Passed: true, Message: strings.Repeat("ok\x1b[31m red\r\n\x00", 64<<10/16)}, nil
	case "read":
		return check.Result{Passed: true, Message: readable(req.Config["path"])}, nil
	case "echo":
		b, err := json.Marshal(req)
		if err != nil {
			return check.Result{}, err
		}
		return check.Result{Passed: true, Message: string(b)}, nil
	default:
		return check.Result{}, fmt.Errorf("unknown mode %q", mode)
	}
	return check.Result{}, nil
}

// readable says, for the path it is told and for files any plugin needs, whether it could read
// them: "path: ok; self: ok; etc: ok", or the error in place of "ok".
func readable(path string) string {
	say := func(err error) string {
		if err != nil {
			return err.Error()
		}
		return "ok"
	}
	_, errPath := os.ReadFile(path)
	self, err := os.Executable()
	if err == nil {
		_, err = os.ReadDir(filepath.Dir(self))
	}
	_, errEtc := os.ReadFile("/etc/passwd")
	return fmt.Sprintf("path: %s; self: %s; etc: %s", say(errPath), say(err), say(errEtc))
}

func main() {
	// No timestamp, so the controller sees the [WARN] prefix go-plugin reads levels from.
	log.SetFlags(0)
	check.Serve(misbehave{})
}
