// core/status.h — Status and Result<T> live in the public API (tern/status.h);
// library code includes this name.
#pragma once

#include "tern/status.h"
