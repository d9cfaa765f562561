package git

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // OpenSSH's hashed known_hosts names
	"encoding/base64"
	"encoding/pem"
	"net"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
)

func newHostKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	key, err := ssh.NewPublicKey(pub)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return key
}

func hashedName(host string) string {
	salt := []byte("0123456789abcdefghij")
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(host))
	return "|1|" + base64.StdEncoding.EncodeToString(salt) + "|" + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// An SSH server is trusted only with a host key known_hosts lists for its name (plain, hashed,
// or [host]:port on another port); anything else is refused.
func TestHostKeyCallback(t *testing.T) {
	key, other := newHostKey(t), newHostKey(t)
	line := func(host string, k ssh.PublicKey) string { return host + " " + string(ssh.MarshalAuthorizedKey(k)) }
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}
	for _, tc := range []struct {
		name       string
		knownHosts string
		hostname   string
		key        ssh.PublicKey
		wantErr    string
	}{
		{name: "listed", knownHosts: line("git.example", key), hostname: "git.example:22", key: key},
		{name: "listed hashed", knownHosts: line(hashedName("git.example"), key), hostname: "git.example:22", key: key},
		{name: "listed on another port", knownHosts: line("[git.example]:2222", key), hostname: "git.example:2222", key: key},
		{name: "another key", knownHosts: line("git.example", key), hostname: "git.example:22", key: other, wantErr: "is not in known_hosts"},
		{name: "another host", knownHosts: line("evil.example", key), hostname: "git.example:22", key: key, wantErr: "is not in known_hosts"},
		{name: "the port is part of the name", knownHosts: line("git.example", key), hostname: "git.example:2222", key: key, wantErr: "is not in known_hosts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			callback, err := hostKeyCallback([]byte(tc.knownHosts))
			g.Expect(err).NotTo(HaveOccurred())
			err = callback(tc.hostname, addr, tc.key)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

// A credentials Secret is read as Flux's GitRepository reads it; SSH needs an identity and a
// known_hosts with a host key.
func TestCredentialsFrom(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	block, err := ssh.MarshalPrivateKey(priv, "")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	identity := pem.EncodeToMemory(block)
	knownHosts := []byte("git.example " + string(ssh.MarshalAuthorizedKey(newHostKey(t))))
	for _, tc := range []struct {
		name     string
		url      string
		data     map[string][]byte
		wantAuth string
		wantErr  string
	}{
		{name: "basic auth", url: "https://git.example/org/config.git", data: map[string][]byte{"username": []byte("ci"), "password": []byte("p")}, wantAuth: "http-basic-auth"},
		{name: "a bearer token", url: "https://git.example/org/config.git", data: map[string][]byte{"bearerToken": []byte("t")}, wantAuth: "http-token-auth"},
		{name: "anonymous", url: "https://git.example/org/config.git"},
		{name: "ssh", url: "ssh://git@git.example/org/config.git", data: map[string][]byte{"identity": identity, "known_hosts": knownHosts}, wantAuth: "ssh-public-keys"},
		{name: "ssh without known_hosts", url: "ssh://git@git.example/org/config.git", data: map[string][]byte{"identity": identity},
			wantErr: "'known_hosts' is required"},
		{name: "ssh with a broken identity", url: "ssh://git@git.example/org/config.git", data: map[string][]byte{"identity": []byte("nope"), "known_hosts": knownHosts},
			wantErr: "its identity is not a private key"},
		{name: "ssh with an empty known_hosts", url: "ssh://git@git.example/org/config.git", data: map[string][]byte{"identity": identity, "known_hosts": []byte("\n")},
			wantErr: "known_hosts lists no host key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			creds, err := CredentialsFrom(tc.url, tc.data)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			if tc.wantAuth == "" {
				g.Expect(creds.Auth).To(BeNil())
				return
			}
			g.Expect(creds.Auth.Name()).To(Equal(tc.wantAuth))
		})
	}
}
