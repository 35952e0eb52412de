-- Argo CD health of a Slipway RebootPolicy, from the conditions the update-operator writes (kstatus:
-- Ready, Reconciling, Stalled, each with the generation it describes).
local hs = {}
local gen = obj.metadata.generation
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the update-operator to report on this pool"
  return hs
end
local conds = {}
for _, c in ipairs(obj.status.conditions) do
  conds[c.type] = c
end
local function current(c)
  return c ~= nil and (gen == nil or c.observedGeneration == nil or c.observedGeneration >= gen)
end
if not current(conds.Ready) then
  hs.status = "Progressing"
  hs.message = "Waiting for the update-operator to report on generation " .. tostring(gen)
  return hs
end
if current(conds.Stalled) and conds.Stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = conds.Stalled.message
  return hs
end
if current(conds.Reconciling) and conds.Reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = conds.Reconciling.message
  return hs
end
if conds.Ready.status == "True" then
  hs.status = "Healthy"
else
  hs.status = "Degraded"
end
hs.message = conds.Ready.message
return hs
