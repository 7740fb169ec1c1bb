-- wrk script: level-1 text rounds through POST /api/chat, spread over 64
-- conversations (rounds of one conversation run one at a time).
local token = os.getenv("CAAL_API_TOKEN")
local counter = 0
request = function()
  counter = counter + 1
  local text = (counter % 2 == 0) and "turn on the kitchen lights" or "turn off the kitchen lights"
  local body = string.format('{"conversation_id":"load-%d","text":"%s"}', counter % 64, text)
  return wrk.format("POST", "/api/chat",
    { ["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json" }, body)
end
response = function(status)
  if status ~= 200 then
    io.stderr:write("non-200 status: " .. status .. "\n")
  end
end
