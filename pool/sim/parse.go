package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// ParsePools reads "template[/net/size]=warm,..." (the --pools flag), e.g.
// "default=64,py/bridge/small=8". Net and size may be left out or empty,
// meaning the server defaults.
func ParsePools(s string) (map[pool.Key]int, error) {
	out := map[pool.Key]int{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		axes, warm, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("pool %q: want template[/net/size]=warm", item)
		}
		n, err := strconv.Atoi(strings.TrimSpace(warm))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("pool %q: warm target must be an integer >= 0", item)
		}
		parts := strings.Split(strings.TrimSpace(axes), "/")
		if len(parts) > 3 || parts[0] == "" {
			return nil, fmt.Errorf("pool %q: want template[/net/size]", item)
		}
		parts = append(parts, "", "")
		k := pool.Key{Template: parts[0], Net: parts[1], Size: parts[2]}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("pool %q: listed twice", item)
		}
		out[k] = n
	}
	return out, nil
}

// ParseList reads a comma-separated list (--redirect, --peer-templates),
// dropping empty items.
func ParseList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
