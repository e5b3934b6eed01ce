// Registration of every tool family; each lives in its own tools_*.cpp file.
#pragma once

namespace kiln::server {

class ToolRegistry;

void register_workspace_tools(ToolRegistry& registry);  // workspace_open, workspace_list, workspace_info
void register_file_tools(ToolRegistry& registry);       // file_read, file_write, file_edit, file_move, file_delete
void register_search_tools(ToolRegistry& registry);     // file_list, file_search

}  // namespace kiln::server
