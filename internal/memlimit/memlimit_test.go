package memlimit

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	. "github.com/onsi/gomega"
)

func TestCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		files     map[string]string
		wantLimit int64
		wantOK    bool
		wantErr   string
	}{
		{name: "cgroup v2 limit", files: map[string]string{"sys/fs/cgroup/memory.max": "268435456\n"}, wantLimit: 268435456, wantOK: true},
		{name: "cgroup v2 without a limit", files: map[string]string{"sys/fs/cgroup/memory.max": "max\n"}},
		{name: "cgroup v1 limit", files: map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "134217728"}, wantLimit: 134217728, wantOK: true},
		{name: "cgroup v1 without a limit", files: map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"}},
		{name: "no cgroup files"},
		{name: "garbage", files: map[string]string{"sys/fs/cgroup/memory.max": "lots"}, wantErr: `cannot read the cgroup memory limit "lots"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			root := t.TempDir()
			for name, content := range tc.files {
				g.Expect(os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)).To(Succeed())
				g.Expect(os.WriteFile(filepath.Join(root, name), []byte(content), 0o644)).To(Succeed())
			}
			limit, ok, err := cgroupLimit(root)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(Equal(tc.wantOK))
			g.Expect(limit).To(Equal(tc.wantLimit))
		})
	}
}

func TestSet(t *testing.T) {
	limit := float64(256 << 20)
	for _, tc := range []struct {
		name       string
		gomemlimit string
		want       int64
	}{
		{name: "nine tenths of the cgroup limit", want: int64(limit * share)},
		{name: "GOMEMLIMIT wins", gomemlimit: "100MiB", want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv("GOMEMLIMIT", tc.gomemlimit)
			root := t.TempDir()
			g.Expect(os.MkdirAll(filepath.Join(root, "sys/fs/cgroup"), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(root, "sys/fs/cgroup/memory.max"), []byte("268435456"), 0o644)).To(Succeed())
			got, err := Set(root)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestSetGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name, gogc   string
		want, effect int
	}{
		{name: "half of the live heap by default", want: gCPercent, effect: gCPercent},
		{name: "GOGC wins", gogc: "200", want: 0, effect: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv("GOGC", tc.gogc)
			// The test sets the runtime's own value: leave it as it was for the tests after.
			before := debug.SetGCPercent(100)
			t.Cleanup(func() { debug.SetGCPercent(before) })
			g.Expect(SetGCPercent()).To(Equal(tc.want))
			g.Expect(debug.SetGCPercent(100)).To(Equal(tc.effect))
		})
	}
}
