package client

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"

	"braid/proxy/internal/auth"
)

// Users holds SOCKS5 user/password credentials (RFC 1929) for local users.
type Users map[string]string

// LoadUsers reads "user:password" lines (mode 0600 or stricter; '#'
// comments). Errors name the line, never the password.
func LoadUsers(path string) (Users, error) {
	if err := auth.CheckSecretFileMode(path); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading users file: %w", err)
	}
	u, err := ParseUsers(data)
	if err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	return u, nil
}

// ParseUsers parses the users file format.
func ParseUsers(data []byte) (Users, error) {
	users := Users{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		user, pass, ok := strings.Cut(text, ":")
		if !ok || user == "" || pass == "" || len(user) > 255 || len(pass) > 255 {
			return nil, fmt.Errorf("line %d: want user:password (1..255 bytes each)", line)
		}
		users[user] = pass
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("no users")
	}
	return users, sc.Err()
}

// Check compares in constant time (per candidate).
func (u Users) Check(user, pass string) bool {
	want, ok := u[user]
	if !ok {
		want = "\x00invalid"
	}
	eq := subtle.ConstantTimeCompare([]byte(want), []byte(pass)) == 1
	return ok && eq
}
