package check_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hashicorp/go-plugin"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/stagecoach-dev/stagecoach/plugin/check"
)

// recorder answers with a fixed result or error and keeps the request it was sent.
type recorder struct {
	result check.Result
	err    error
	got    chan check.Request
}

func (r *recorder) Check(_ context.Context, req check.Request) (check.Result, error) {
	r.got <- req
	return r.result, r.err
}

func dispense(t *testing.T, impl check.Checker) (check.Checker, *plugin.GRPCClient) {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, check.PluginSets(impl)[check.ProtocolVersion])
	// Close asks the server to stop, as the controller does with a real plugin; stopping the
	// server here as well would race with that (GRPCServer.Stop is not safe to call twice at once).
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(check.PluginName)
	if err != nil {
		t.Fatalf("dispense %q: %v", check.PluginName, err)
	}
	checker, ok := raw.(check.Checker)
	if !ok {
		t.Fatalf("dispensed %T, want a check.Checker", raw)
	}
	return checker, client
}

func TestCheckOverGRPC(t *testing.T) {
	req := check.Request{
		Stage: "payments-prod", Namespace: "delivery", Environment: "prod", Service: "payments",
		Version: "1.4.2", Digest: "sha256:" + "ab12", Phase: check.PhasePostApply,
		Config: map[string]string{"allow": "true", "deny": "sha256:cd34"},
	}
	tests := []struct {
		name    string
		result  check.Result
		err     error
		want    check.Result
		wantErr string
	}{
		{name: "passed", result: check.Result{Passed: true, Message: "fine"}, want: check.Result{Passed: true, Message: "fine"}},
		{name: "failed with message", result: check.Result{Message: "denied"}, want: check.Result{Message: "denied"}},
		{name: "checker error", err: errors.New("registry unreachable"), wantErr: "registry unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			impl := &recorder{result: tt.result, err: tt.err, got: make(chan check.Request, 1)}
			checker, _ := dispense(t, impl)

			res, err := checker.Check(t.Context(), req)
			g.Expect(<-impl.got).To(Equal(req), "every request field reaches the plugin")
			if tt.wantErr != "" {
				var checkErr *check.Error
				g.Expect(errors.As(err, &checkErr)).To(BeTrue(), "a Checker error comes back as *check.Error, got %v", err)
				g.Expect(checkErr.Message).To(Equal(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res).To(Equal(tt.want))
		})
	}
}

// TestWireFormat calls the service as PROTOCOL.md describes it, without the SDK's client: a
// plugin written in another language sees exactly this.
func TestWireFormat(t *testing.T) {
	tests := []struct {
		name     string
		request  map[string]any
		want     check.Request
		wantCode codes.Code
	}{
		{
			name: "documented fields",
			request: map[string]any{
				"stage": "web-staging", "namespace": "team-a", "environment": "staging", "service": "web",
				"version": "2.0.0", "digest": "sha256:ff", "phase": "pre-apply",
				"config": map[string]any{"deny": "sha256:00"},
			},
			want: check.Request{
				Stage: "web-staging", Namespace: "team-a", Environment: "staging", Service: "web",
				Version: "2.0.0", Digest: "sha256:ff", Phase: check.PhasePreApply,
				Config: map[string]string{"deny": "sha256:00"},
			},
		},
		{
			name:    "unknown fields are ignored, for newer controllers",
			request: map[string]any{"stage": "web", "attempt": 3.0},
			want:    check.Request{Stage: "web"},
		},
		{
			name:     "a field of the wrong type is refused",
			request:  map[string]any{"stage": true},
			wantCode: codes.InvalidArgument,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			impl := &recorder{result: check.Result{Passed: true, Message: "ok"}, got: make(chan check.Request, 1)}
			_, client := dispense(t, impl)

			in, err := structpb.NewStruct(tt.request)
			g.Expect(err).NotTo(HaveOccurred())
			out := new(structpb.Struct)
			err = client.Conn.Invoke(t.Context(), "/stagecoach.check.v1.CheckPlugin/Check", in, out)
			if tt.wantCode != codes.OK {
				g.Expect(status.Code(err)).To(Equal(tt.wantCode), "error: %v", err)
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(<-impl.got).To(Equal(tt.want))
			g.Expect(out.AsMap()).To(Equal(map[string]any{"passed": true, "message": "ok"}))
		})
	}
}

func TestPluginSetsOfferOnlyTheCurrentVersion(t *testing.T) {
	g := NewWithT(t)
	sets := check.PluginSets(nil)
	g.Expect(sets).To(HaveLen(1))
	g.Expect(sets).To(HaveKey(check.ProtocolVersion))
	g.Expect(sets[check.ProtocolVersion]).To(HaveKey(check.PluginName))
	g.Expect(check.HandshakeConfig().MagicCookieKey).To(Equal("STAGECOACH_CHECK_PLUGIN"))
}
