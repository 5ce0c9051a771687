package plan

import (
	_ "fmt"

	_ "github.com/vishvananda/netns"
)
