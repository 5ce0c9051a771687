package render

import _ "example.com/m/helper"
