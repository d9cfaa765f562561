package git

import (
	"context"
	"net"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stagecoach-dev/stagecoach/internal/semver"
	"github.com/stagecoach-dev/stagecoach/internal/source/git/gittest"
)

// fetched fetches refspec of srv into a new clone, as the source does.
func fetched(t *testing.T, srv *gittest.Server, creds Credentials, refspec string) (*repository, error) {
	t.Helper()
	r := &repository{}
	return r, r.fetch(t.Context(), srv.URL, creds, refspec)
}

const mainRefspec = "+refs/heads/main:refs/heads/main"

func names(versions []Version) []string {
	var out []string
	for _, v := range versions {
		out = append(out, v.Subject)
	}
	return out
}

// A branch offers its commits newer than the running one, newest first; paths keep the commits
// that change them; a branch force-pushed behind what runs is rewound (never backwards).
func TestBranchVersions(t *testing.T) {
	srv := gittest.NewServer(t, gittest.Options{})
	c1 := srv.Commit("base", map[string]string{"base/app.yaml": "v: 1"}, nil)
	c2 := srv.Commit("staging overlay", map[string]string{"overlays/staging/kustomization.yaml": "v: 2"}, nil)
	srv.Commit("prod overlay", map[string]string{"overlays/prod/kustomization.yaml": "v: 3"}, nil)
	c4 := srv.Commit("staging again\n\nwith a body", map[string]string{"overlays/staging/patch.yaml": "v: 4"}, nil)
	srv.Commit("delete a staging file", map[string]string{"overlays/staging/patch.yaml": ""}, nil)

	for _, tc := range []struct {
		name        string
		paths       []string
		current     string
		wantSubject []string
		wantRewound bool
	}{
		{name: "nothing runs yet", wantSubject: []string{"delete a staging file", "staging again", "prod overlay", "staging overlay", "base"}},
		{name: "newer than the running commit", current: c2, wantSubject: []string{"delete a staging file", "staging again", "prod overlay"}},
		{name: "only commits that change a path (a deletion counts)", paths: []string{"overlays/staging/"},
			wantSubject: []string{"delete a staging file", "staging again", "staging overlay"}},
		{name: "a path names a file", paths: []string{"/base/app.yaml"}, wantSubject: []string{"base"}},
		{name: "a path prefix is not a directory", paths: []string{"overlays/stag"}, wantSubject: nil},
		{name: "the running commit is not on the branch", current: "0123456789012345678901234567890123456789", wantRewound: true},
		{name: "the head runs", current: c1, paths: []string{"base"}, wantSubject: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r, err := fetched(t, srv, Credentials{}, mainRefspec)
			g.Expect(err).NotTo(HaveOccurred())
			versions, rewound, err := branchVersions(r.repo, "main", "", tc.paths, tc.current)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rewound).To(Equal(tc.wantRewound))
			g.Expect(names(versions)).To(Equal(tc.wantSubject))
		})
	}

	t.Run("a force-push behind the running commit is seen by the next fetch", func(t *testing.T) {
		g := NewWithT(t)
		r, err := fetched(t, srv, Credentials{}, mainRefspec)
		g.Expect(err).NotTo(HaveOccurred())
		srv.Reset(c2)
		g.Expect(r.fetch(t.Context(), srv.URL, Credentials{}, mainRefspec)).To(Succeed())
		_, rewound, err := branchVersions(r.repo, "main", "", nil, c4)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rewound).To(BeTrue())
		versions, rewound, err := branchVersions(r.repo, "main", "", nil, c1)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rewound).To(BeFalse())
		g.Expect(names(versions)).To(Equal([]string{"staging overlay"}))
	})

	t.Run("a branch the server does not have", func(t *testing.T) {
		g := NewWithT(t)
		_, err := fetched(t, srv, Credentials{}, "+refs/heads/nope:refs/heads/nope")
		g.Expect(err).To(MatchError(ErrRefNotFound))
	})
}

// Tags that meet the constraint are versions of the commits they name, highest first; annotated
// and lightweight tags alike.
func TestTagVersions(t *testing.T) {
	g := NewWithT(t)
	srv := gittest.NewServer(t, gittest.Options{})
	signer := gittest.NewPGPSigner(t, "release")
	c1 := srv.Commit("one", map[string]string{"a": "1"}, nil)
	c2 := srv.Commit("two", map[string]string{"a": "2"}, nil)
	c3 := srv.Commit("three", map[string]string{"a": "3"}, nil)
	srv.Tag("v1.0.0", c1, nil)
	srv.Tag("v1.2.0", c2, &signer)
	srv.Tag("v2.0.0-rc.1", c3, nil)
	srv.Tag("latest", c3, nil)
	r, err := fetched(t, srv, Credentials{}, "+refs/tags/*:refs/tags/*")
	g.Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		constraint string
		wantTags   []string
		wantCommit []string
	}{
		{constraint: ">=1.0.0", wantTags: []string{"v1.2.0", "v1.0.0"}, wantCommit: []string{c2, c1}},
		{constraint: ">=1.0.0-0", wantTags: []string{"v2.0.0-rc.1", "v1.2.0", "v1.0.0"}, wantCommit: []string{c3, c2, c1}},
		{constraint: "~1.0", wantTags: []string{"v1.0.0"}, wantCommit: []string{c1}},
	} {
		t.Run(tc.constraint, func(t *testing.T) {
			g := NewWithT(t)
			versions, _, err := tagVersions(r.repo, semver.MustParseConstraint(tc.constraint))
			g.Expect(err).NotTo(HaveOccurred())
			var tags, commits []string
			for _, v := range versions {
				tags, commits = append(tags, v.Tag), append(commits, v.Commit)
			}
			g.Expect(tags).To(Equal(tc.wantTags))
			g.Expect(commits).To(Equal(tc.wantCommit))
		})
	}
}

// Commits and tags are trusted only when signed by a key of the verify Secret, OpenPGP or SSH.
func TestVerifyCommit(t *testing.T) {
	srv := gittest.NewServer(t, gittest.Options{})
	trusted, stranger, sshKey, otherSSH := gittest.NewPGPSigner(t, "release"), gittest.NewPGPSigner(t, "stranger"),
		gittest.NewSSHSigner(t), gittest.NewSSHSigner(t)
	signed := srv.Commit("signed", map[string]string{"a": "1"}, &trusted)
	unsigned := srv.Commit("unsigned", map[string]string{"a": "2"}, nil)
	byStranger := srv.Commit("by a stranger", map[string]string{"a": "3"}, &stranger)
	bySSH := srv.Commit("ssh", map[string]string{"a": "4"}, &sshKey)
	byOtherSSH := srv.Commit("other ssh", map[string]string{"a": "5"}, &otherSSH)
	srv.Tag("v1.0.0", signed, &trusted)
	srv.Tag("v1.1.0", unsigned, &stranger)
	srv.Tag("v1.2.0", signed, nil)
	r, err := fetched(t, srv, Credentials{}, "+refs/heads/main:refs/heads/main")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(r.fetch(t.Context(), srv.URL, Credentials{}, "+refs/tags/*:refs/tags/*")).To(Succeed())
	keys, err := KeysFrom(map[string][]byte{"release.asc": trusted.Public, "ci.sshpub": sshKey.Public})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		name       string
		commit     string
		tag        string
		mode       string
		wantSigner string
		wantErr    string
	}{
		{name: "an OpenPGP-signed commit", commit: signed, mode: "HEAD", wantSigner: "commit " + signed[:7] + " signed by OpenPGP key"},
		{name: "an unsigned commit", commit: unsigned, mode: "HEAD", wantErr: "it is not signed"},
		{name: "a commit signed by a key not trusted", commit: byStranger, mode: "HEAD", wantErr: "its OpenPGP signature is from no trusted key"},
		{name: "an SSH-signed commit", commit: bySSH, mode: "HEAD", wantSigner: "signed by SSH key SHA256:"},
		{name: "a commit signed by an SSH key not trusted", commit: byOtherSSH, mode: "HEAD", wantErr: "its SSH signature is from no trusted key"},
		{name: "a signed tag", commit: signed, tag: "v1.0.0", mode: "Tag", wantSigner: "tag v1.0.0 signed by OpenPGP key"},
		{name: "a signed tag and commit", commit: signed, tag: "v1.0.0", mode: "TagAndHEAD", wantSigner: "commit " + signed[:7] + " signed by"},
		{name: "a tag signed by a stranger", commit: unsigned, tag: "v1.1.0", mode: "Tag", wantErr: "tag v1.1.0: its OpenPGP signature is from no trusted key"},
		{name: "a lightweight tag", commit: signed, tag: "v1.2.0", mode: "Tag", wantErr: "tag v1.2.0 is a lightweight tag"},
		{name: "tag mode without a tag", commit: signed, mode: "Tag", wantErr: "has no tag to verify"},
		{name: "a commit not fetched", commit: "0123456789012345678901234567890123456789", mode: "HEAD", wantErr: "is not in the fetched repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			signer, err := verifyCommit(r.repo, tc.commit, tc.tag, tc.mode, keys)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(signer).To(ContainSubstring(tc.wantSigner))
		})
	}
}

// Fetches with credentials: the right ones fetch, wrong or none are refused (Unauthorized), a
// server that is not there is unreachable.
func TestFetchCredentials(t *testing.T) {
	srv := gittest.NewServer(t, gittest.Options{Username: "ci", Password: "s3cret"})
	srv.Commit("one", map[string]string{"a": "1"}, nil)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	gone := "http://" + closed.Addr().String() + "/config.git"
	NewWithT(t).Expect(closed.Close()).To(Succeed())

	for _, tc := range []struct {
		name    string
		url     string
		secret  map[string][]byte
		wantErr error
	}{
		{name: "the right password", url: srv.URL, secret: map[string][]byte{"username": []byte("ci"), "password": []byte("s3cret")}},
		{name: "a wrong password", url: srv.URL, secret: map[string][]byte{"username": []byte("ci"), "password": []byte("nope")}, wantErr: ErrUnauthorized},
		{name: "no credentials", url: srv.URL, wantErr: ErrUnauthorized},
		{name: "a server that is not there", url: gone, wantErr: ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			creds, err := CredentialsFrom(tc.url, tc.secret)
			g.Expect(err).NotTo(HaveOccurred())
			r := &repository{}
			err = r.fetch(context.WithoutCancel(t.Context()), tc.url, creds, mainRefspec)
			if tc.wantErr != nil {
				g.Expect(err).To(MatchError(tc.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

// Keys: .sshpub entries are SSH keys, the rest OpenPGP key rings; a Secret without keys, or an
// .sshpub entry without a key, is refused.
func TestKeysFrom(t *testing.T) {
	pgp, ssh := gittest.NewPGPSigner(t, "a"), gittest.NewSSHSigner(t)
	for _, tc := range []struct {
		name    string
		data    map[string][]byte
		wantPGP int
		wantSSH int
		wantErr string
	}{
		{name: "both kinds", data: map[string][]byte{"a.asc": pgp.Public, "b.sshpub": ssh.Public}, wantPGP: 1, wantSSH: 1},
		{name: "no entry", data: map[string][]byte{}, wantErr: "it holds no key"},
		{name: "an sshpub entry without a key", data: map[string][]byte{"b.sshpub": []byte("not a key")}, wantErr: "entry b.sshpub holds no SSH public key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			keys, err := KeysFrom(tc.data)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(keys.PGP).To(HaveLen(tc.wantPGP))
			g.Expect(keys.SSH).To(HaveLen(tc.wantSSH))
		})
	}
}
