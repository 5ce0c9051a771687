package x

import _ "github.com/google/nftables"
