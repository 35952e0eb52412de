package simnode

import (
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// fastBackoff keeps simulated reboot retries quick.
var fastBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 6, Cap: 2 * time.Second}
