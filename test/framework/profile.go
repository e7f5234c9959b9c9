package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
)

// SaveProfile fetches url, a /debug/pprof endpoint, with client and writes
// the answer to file: a CPU profile blocks for the seconds its URL asks for.
func SaveProfile(ctx context.Context, client *http.Client, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, raw)
	}
	return os.WriteFile(file, raw, 0o644)
}
