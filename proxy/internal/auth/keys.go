package auth

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
)

// MinKeyLen is the shortest pre-shared key accepted (256 bits).
const MinKeyLen = 32

// MaxIDLen bounds client identifiers (they travel in the clear in the hello).
const MaxIDLen = 64

// Keys maps client identifiers to pre-shared keys. The zero value is empty.
type Keys map[string][]byte

// CheckSecretFileMode refuses files that group or others may read or write:
// a pre-shared key or password readable by other users is not secret.
func CheckSecretFileMode(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("checking secret file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("secret file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("secret file %s has mode %04o: group/others may access it; run: chmod 600 %s", path, perm, path)
	}
	return nil
}

// LoadKeys reads a key file: one "client-id key" pair per line, the key in
// hex or standard base64, at least MinKeyLen bytes; blank lines and lines
// starting with '#' are ignored. The file must be mode 0600 or stricter.
// Errors name the line but never echo key material.
func LoadKeys(path string) (Keys, error) {
	if err := CheckSecretFileMode(path); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading key file: %w", err)
	}
	keys, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return keys, nil
}

// ParseKeys parses the key file format described at LoadKeys.
func ParseKeys(data []byte) (Keys, error) {
	keys := Keys{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"client-id key\"", line)
		}
		id := fields[0]
		if err := CheckID(id); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if _, dup := keys[id]; dup {
			return nil, fmt.Errorf("line %d: duplicate client id %q", line, id)
		}
		key, err := decodeKey(fields[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		keys[id] = key
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no keys")
	}
	return keys, nil
}

func decodeKey(s string) ([]byte, error) {
	var key []byte
	if b, err := hex.DecodeString(s); err == nil {
		key = b
	} else if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		key = b
	} else {
		return nil, fmt.Errorf("key is neither hex nor base64")
	}
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("key is %d bytes, need at least %d", len(key), MinKeyLen)
	}
	// A key of zero bytes is what a template or a failed generator leaves
	// behind, never a secret.
	if !slices.ContainsFunc(key, func(b byte) bool { return b != 0 }) {
		return nil, fmt.Errorf("key is all zero bytes: generate one (e.g. head -c 32 /dev/urandom | xxd -p -c 64)")
	}
	return key, nil
}

// CheckID accepts identifiers of 1..MaxIDLen characters from [A-Za-z0-9._-].
func CheckID(id string) error {
	if len(id) == 0 || len(id) > MaxIDLen {
		return fmt.Errorf("client id must be 1..%d characters", MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("client id has character %q (allowed: A-Z a-z 0-9 . _ -)", c)
		}
	}
	return nil
}
