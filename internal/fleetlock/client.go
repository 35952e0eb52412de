package fleetlock

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Ask sends what Zincati sends (POST base/v1/<op>, header fleet-lock-protocol: true, body
// {"client_params":{"id":...,"group":...}}) and returns the reply's status and kind: the client side
// of the protocol, for tests and tools that play a Zincati node.
func Ask(ctx context.Context, base, op, id, group string) (status int, kind string, err error) {
	body := fmt.Sprintf(`{"client_params":{"id":%q,"group":%q}}`, id, group)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/v1/"+op, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("fleet-lock-protocol", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var reply struct{ Kind string }
	_ = json.NewDecoder(resp.Body).Decode(&reply)
	return resp.StatusCode, reply.Kind, nil
}
