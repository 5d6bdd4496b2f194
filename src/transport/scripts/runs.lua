-- Whether the server runs scripts at all: loaded and run after a script call was answered
-- with a plain ERR. Any Lua engine runs it; it reads and writes nothing.
-- Reply    1
return 1
