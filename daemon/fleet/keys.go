package fleet

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/memberlist"
)

// ReadKeyFile reads a gossip key file: one base64 key (16, 24 or 32 bytes:
// AES-128, -192 or -256) per line, the first the primary, which encrypts
// what this node sends; every key decrypts what it receives. Blank lines
// and lines starting with # are skipped. During a key rotation every node
// holds both keys (new first once all have both, then the old one
// removed).
func ReadKeyFile(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip key file: %w", err)
	}
	keys, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("%s%w", path, err)
	}
	return keys, nil
}

// ParseKeys reads a key file's content (ReadKeyFile). Errors start with
// ":line: " for the file name to precede.
func ParseKeys(data []byte) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf(":%d: not a base64 key: %v", line, err)
		}
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf(":%d: a key is 16, 24 or 32 bytes, not %d", line, n)
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf(": %v", err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf(": no key")
	}
	return keys, nil
}

// keyring is memberlist's keyring of keys, the first the primary.
func keyring(keys [][]byte) (*memberlist.Keyring, error) {
	kr, err := memberlist.NewKeyring(keys[1:], keys[0])
	if err != nil {
		return nil, fmt.Errorf("gossip keys: %w", err)
	}
	return kr, nil
}
